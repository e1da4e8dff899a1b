"""Read tools (memories:read): search, date search and status. Every answer fits the result
budget: long texts are trimmed with a marker naming inspect_memory, and rows left out are
counted in ``omitted``."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from mcp_memoryrouter import schemas
from mcp_memoryrouter.mcp.binding import Resolver
from mcp_memoryrouter.mcp.budget import Budget, largest_fit, shaped, trim, whole_by
from mcp_memoryrouter.mcp.tools import READ_ONLY, Catalog, backend_errors

EPOCH = "1970-01-01"
TIER_GUIDE = (
    " Tiers: 3 = high-level reflections (identity, principles, what matters most); 2 = "
    "reflections of specific events; 1 = raw verbatim memories. Only 2 and 3 carry importance "
    "(1-10). Topic lookups: omit tiers and importance (a high importance hides detail). "
    "Overviews: tiers [3]. Most important things: tiers [3], importance 8, limit 250. Events "
    "without raw noise: tiers [2]. Exact wording: search tiers [3], then inspect_memory down "
    "the lineage."
)
FITTED = (
    " Long texts are trimmed with a marker (inspect_memory returns the whole text); omitted "
    "counts results left out to fit."
)

Tiers = Annotated[
    list[Literal[1, 2, 3]] | None,
    Field(description="Only these tiers; omit to blend all."),
]
MinImportance = Annotated[
    int | None, Field(ge=1, le=10, description="Minimum importance; excludes tier 1.")
]


class SearchOutput(BaseModel):
    memories: list[schemas.MemoryRow]
    omitted: int = 0
    consolidation_suggestion: str | None = None


class DateSearchOutput(SearchOutput):
    returned: schemas.Covers
    truncated: bool


class StatusOutput(BaseModel):
    connected: bool
    storage: str
    vault: str
    total_memories: int
    total_tokens: int
    tiers: dict[str, schemas.TierStats]
    oldest: str | None
    newest: str | None
    granted_scopes: list[str]
    reflection: schemas.Reflection
    consolidation_suggestion: str | None = None


def fitted_rows(rows: list[schemas.MemoryRow], budget: Budget) -> list[schemas.MemoryRow]:
    """``rows`` with each text cut to its share of the budget."""
    cap = budget.text_share(len(rows))
    return [
        row.model_copy(
            update={"content": trim(row.content, cap, whole_by("inspect_memory", row.id))}
        )
        for row in rows
    ]


def fit_search(
    budget: Budget, rows: list[schemas.MemoryRow], suggestion: str | None
) -> CallToolResult:
    rows = fitted_rows(rows, budget)
    return largest_fit(
        len(rows),
        lambda k: shaped(
            SearchOutput(
                memories=rows[:k], omitted=len(rows) - k, consolidation_suggestion=suggestion
            )
        ),
        budget.fits,
    )


def _key(row: schemas.MemoryRow, returned: schemas.Covers, order: str) -> str:
    """A row's date-paging key, as the vault pages (see vault/rules/window.py): its coverage start
    newest first, its end oldest first, clamped into the window."""
    if order == "newest_first":
        return max(row.covers.from_ if row.covers else row.date or "", returned.from_)
    return min(row.covers.to if row.covers else row.date or "", returned.to)


def fit_page(
    budget: Budget, found: schemas.DateSearchResponse, order: str, ranked: bool
) -> CallToolResult:
    """A date page within the budget, cut as the vault cuts pages: after whole groups of rows
    sharing a paging key, the open bound of ``returned`` set to the first group left out, so
    following it visits every row once. A first group too large to fit is shown in part,
    the rest counted in ``omitted``, and paging moves on past it. A relevance-ranked page
    (with a query) is simply cut short, what it leaves out counted in ``omitted``."""
    rows = fitted_rows(found.memories, budget)
    keys = [] if ranked else [_key(row, found.returned, order) for row in rows]
    cuts = [i for i in range(1, len(rows)) if ranked or keys[i] != keys[i - 1]] + [len(rows)]

    def build(shown: int, resume: int) -> CallToolResult:
        returned, truncated = found.returned, found.truncated
        if resume < len(rows):
            truncated = True
            if not ranked:
                bound = "from_" if order == "newest_first" else "to"
                returned = returned.model_copy(update={bound: keys[resume]})
        page = DateSearchOutput(
            memories=rows[:shown],
            # left out for good: ranked rows past the cut, or the rest of a group too large
            omitted=len(rows) - shown if ranked else resume - shown,
            returned=returned,
            truncated=truncated,
            consolidation_suggestion=found.reflection.suggestion,
        )
        return shaped(page)

    groups, result = largest_fit(
        len(cuts),
        lambda g: (g, build(cuts[g - 1], cuts[g - 1]) if g else build(0, 0)),
        lambda candidate: budget.fits(candidate[1]),
    )
    if groups > 0 or not rows:
        return result
    return largest_fit(cuts[0], lambda k: build(k, cuts[0]), budget.fits)


def register(catalog: Catalog, resolve: Resolver) -> None:
    budget = catalog.budget

    @catalog.tool(
        title="Search memories",
        annotations=READ_ONLY,
        description=(
            "Search the user's long-term memory by meaning and keywords, across all tiers at "
            "once; use it whenever the conversation may depend on something the user said, "
            "decided or did before. Results carry tier, date or covers, importance. "
            "from_date/to_date (ISO) restrict it to a period." + FITTED + TIER_GUIDE
        ),
    )
    async def search_memories(
        query: Annotated[str, Field(min_length=1, max_length=10_000)],
        limit: Annotated[int, Field(ge=1, le=250)] = 10,
        tiers: Tiers = None,
        importance: MinImportance = None,
        from_date: str | None = None,
        to_date: str | None = None,
    ) -> Annotated[CallToolResult, SearchOutput]:
        binding = await resolve()
        binding.require("memories:read")
        async with backend_errors():
            if from_date or to_date:
                body = schemas.DateSearchRequest.model_validate(
                    {
                        "from": from_date or EPOCH,
                        "to": to_date,
                        "query": query,
                        "tiers": tiers,
                        "importance": importance,
                    }
                )
                found = await binding.vault.date_search(body)
                rows, debt = found.memories[:limit], found.reflection
            else:
                result = await binding.vault.search(
                    schemas.SearchRequest(
                        query=query,
                        limit=limit,
                        tiers=list(tiers) if tiers else None,
                        importance=importance,
                    )
                )
                rows, debt = result.memories, result.reflection
        return fit_search(budget, rows, debt.suggestion)

    @catalog.tool(
        title="Search memories by date",
        annotations=READ_ONLY,
        description=(
            "Time-first retrieval: what happened in a period ('last week', 'in February'). "
            "Without a query it lists the window chronologically; with one it ranks by "
            "relevance within it. Reflections match when the period they cover overlaps. "
            "When truncated, call again with to_date = returned.from (newest_first) or "
            "from_date = returned.to (oldest_first). tiers and importance as in "
            "search_memories." + FITTED
        ),
    )
    async def date_search_memories(
        from_date: Annotated[str, Field(description="ISO date (whole UTC day) or datetime.")],
        to_date: Annotated[str | None, Field(description="Inclusive; default now.")] = None,
        query: Annotated[str | None, Field(max_length=10_000)] = None,
        tiers: Tiers = None,
        importance: MinImportance = None,
        max_tokens: Annotated[
            int | None, Field(ge=1000, le=200_000, description="Page size; capped to fit.")
        ] = None,
        order: Literal["newest_first", "oldest_first"] = "newest_first",
    ) -> Annotated[CallToolResult, DateSearchOutput]:
        binding = await resolve()
        binding.require("memories:read")
        page_tokens = budget.content_tokens(max_tokens)
        async with backend_errors():
            body = schemas.DateSearchRequest.model_validate(
                {
                    "from": from_date,
                    "to": to_date,
                    "query": query,
                    "tiers": tiers,
                    "importance": importance,
                    "max_tokens": page_tokens,
                    "order": order,
                }
            )
            found = await binding.vault.date_search(body)
        return fit_page(budget, found, order, ranked=bool(query and query.strip()))

    @catalog.tool(
        title="Memory status",
        annotations=READ_ONLY,
        description=(
            "Connection and vault status: the vault's reference (never its key), memories per "
            "tier, oldest and newest dates, the scopes granted, and the reflection debt."
        ),
    )
    async def memory_status() -> Annotated[CallToolResult, StatusOutput]:
        binding = await resolve()
        binding.require("memories:read")
        async with backend_errors():
            stats = await binding.vault.stats()
            health = await binding.vault.health()
        return shaped(
            StatusOutput(
                connected=True,
                storage=health.store,
                vault=stats.vault,
                total_memories=stats.total_memories,
                total_tokens=stats.total_tokens,
                tiers=stats.tiers,
                oldest=stats.oldest,
                newest=stats.newest,
                granted_scopes=sorted(binding.scopes),
                reflection=stats.reflection,
                consolidation_suggestion=stats.reflection.suggestion,
            )
        )
