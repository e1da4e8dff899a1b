"""Read tools: search, date search and status. Every answer fits the result
budget: long texts are trimmed with a marker naming inspect_memory, and rows left out are
counted in ``omitted``."""

from __future__ import annotations

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.mcp_server.binding import Vault
from mcp_memoryrouter.mcp_server.budget import ResultBudget, largest_fit, shaped, trim, whole_by
from mcp_memoryrouter.mcp_server.catalog import READ_ONLY, ToolSpec
from mcp_memoryrouter.mcp_server.copy import FITTED, TIER_GUIDE
from mcp_memoryrouter.mcp_server.errors import backend_errors
from mcp_memoryrouter.mcp_server.views import SEARCH_VIEW

EPOCH = "1970-01-01"

Tiers = Annotated[schemas.Tiers | None, Field(description="Only these tiers; omit to blend all.")]
MinImportance = Annotated[
    schemas.Importance | None, Field(description="Minimum importance; excludes tier 1.")
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
    oldest: str | None = None  # an empty vault has neither
    newest: str | None = None
    granted_scopes: list[str]
    preferences: int = 0  # current standing preferences (search kinds=["preference"])
    reflection: schemas.Reflection
    consolidation_suggestion: str | None = None


def fitted_rows(rows: list[schemas.MemoryRow], budget: ResultBudget) -> list[schemas.MemoryRow]:
    """``rows`` with each text cut to its share of the budget."""
    cap = budget.text_share(len(rows))
    return [
        row.model_copy(
            update={"content": trim(row.content, cap, whole_by("inspect_memory", row.id))}
        )
        for row in rows
    ]


def fit_search(
    budget: ResultBudget, rows: list[schemas.MemoryRow], suggestion: str | None
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
    budget: ResultBudget, found: schemas.DateSearchResponse, order: str, ranked: bool
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


async def search_memories(
    vault: Vault,
    query: schemas.Query,
    limit: schemas.Limit = limits.SEARCH_LIMIT_DEFAULT,
    tiers: Tiers = None,
    importance: MinImportance = None,
    from_date: schemas.Text | None = None,
    to_date: schemas.Text | None = None,
    as_of: schemas.AsOf = None,
    current: bool | None = None,
) -> Annotated[CallToolResult, SearchOutput]:
    async with backend_errors():
        if from_date or to_date:
            found = await vault.client.date_search(
                schemas.DateSearchRequest.model_construct(
                    from_=from_date or EPOCH,
                    to=to_date,
                    query=query,
                    tiers=tiers,
                    importance=importance,
                    current=current,
                )
            )
            rows, debt = found.memories[:limit], found.reflection
        else:
            result = await vault.client.search(
                schemas.SearchRequest.model_construct(
                    query=query,
                    limit=limit,
                    tiers=tiers,
                    importance=importance,
                    as_of=as_of,
                    current=current,
                )
            )
            rows, debt = result.memories, result.reflection
    return fit_search(vault.budget, rows, debt.suggestion)


async def date_search_memories(
    vault: Vault,
    from_date: Annotated[schemas.Text, Field(description="ISO date (whole UTC day) or datetime.")],
    to_date: Annotated[schemas.Text | None, Field(description="Inclusive; default now.")] = None,
    query: schemas.OptionalQuery | None = None,
    tiers: Tiers = None,
    importance: MinImportance = None,
    max_tokens: Annotated[
        int | None,
        Field(
            ge=limits.CHECKOUT_TOKENS_MIN,
            le=limits.CHECKOUT_TOKENS_MAX,
            description="Page size; capped to fit.",
        ),
    ] = None,
    order: schemas.Order = "newest_first",
) -> Annotated[CallToolResult, DateSearchOutput]:
    async with backend_errors():
        found = await vault.client.date_search(
            schemas.DateSearchRequest.model_construct(
                from_=from_date,
                to=to_date,
                query=query,
                tiers=tiers,
                importance=importance,
                max_tokens=vault.budget.content_tokens(max_tokens),
                order=order,
            )
        )
    return fit_page(vault.budget, found, order, ranked=bool(query and query.strip()))


async def memory_status(vault: Vault) -> Annotated[CallToolResult, StatusOutput]:
    async with backend_errors():
        stats = await vault.client.stats()
        health = await vault.client.health()
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
            granted_scopes=sorted(vault.scopes),
            preferences=stats.preferences,
            reflection=stats.reflection,
            consolidation_suggestion=stats.reflection.suggestion,
        )
    )


TOOLS = (
    ToolSpec(
        search_memories,
        "Search memories",
        "Search the user's long-term memory by meaning and keywords, across all tiers at "
        "once; use it whenever the conversation may depend on something the user said, "
        "decided or did before. "
        "from_date/to_date (ISO) restrict it to a period." + FITTED + TIER_GUIDE,
        READ_ONLY,
        view=SEARCH_VIEW,
    ),
    ToolSpec(
        date_search_memories,
        "Search memories by date",
        "Time-first retrieval: what happened in a period ('last week', 'in February'). "
        "Without a query it lists the window chronologically; with one it ranks by "
        "relevance within it. "
        "When truncated, call again with to_date = returned.from (newest_first) or "
        "from_date = returned.to (oldest_first). tiers and importance as in "
        "search_memories." + FITTED,
        READ_ONLY,
        view=SEARCH_VIEW,
    ),
    ToolSpec(
        memory_status,
        "Memory status",
        "Connection and vault status: the vault's reference (never its key), memories per "
        "tier, oldest and newest dates, the scopes granted, and the reflection debt.",
        READ_ONLY,
    ),
)
