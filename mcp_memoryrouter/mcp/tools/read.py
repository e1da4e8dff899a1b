"""Read tools (memories:read): search, date search, inspect, status, and the search/fetch
pair ChatGPT connectors and deep research require."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from mcp_memoryrouter import schemas
from mcp_memoryrouter.mcp.binding import Resolver
from mcp_memoryrouter.mcp.tools import TIER_GUIDE, Catalog, backend_errors

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
EPOCH = "1970-01-01"

Tiers = Annotated[
    list[Literal[1, 2, 3]] | None,
    Field(description="Only these tiers (a non-empty subset of [1, 2, 3]); omit to blend all."),
]
MinImportance = Annotated[
    int | None,
    Field(ge=1, le=10, description="Minimum importance 1-10; excludes raw (tier 1) memories."),
]


class SearchOutput(BaseModel):
    memories: list[schemas.MemoryRow]
    consolidation_suggestion: str | None = Field(
        default=None, description="Set when unconsolidated memories call for consolidate_memories."
    )


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


class SearchHit(BaseModel):
    id: str
    title: str
    url: str


class SearchResults(BaseModel):
    results: list[SearchHit]


class FetchedMemory(BaseModel):
    id: str
    title: str
    text: str
    url: str
    metadata: dict[str, str | int | None] | None


def _url(memory_id: str) -> str:
    return f"memory://memories/{memory_id}"


def _title(content: str) -> str:
    line = " ".join(content.split())
    return line if len(line) <= 80 else line[:77] + "..."


def register(catalog: Catalog, resolve: Resolver) -> None:
    @catalog.tool(
        title="Search memories",
        annotations=READ_ONLY,
        description=(
            "Search the user's long-term memory by meaning and keywords, across all three "
            "tiers at once; every result is tagged with its tier, reflections with their "
            "importance and the period they cover. Use it whenever the conversation may "
            "depend on something the user said, decided or did before. Give from_date/to_date "
            "(ISO dates) to search only within a period." + TIER_GUIDE
        ),
    )
    async def search_memories(
        query: Annotated[
            str, Field(min_length=1, max_length=10_000, description="What to look for.")
        ],
        limit: Annotated[int, Field(ge=1, le=250, description="How many results (1-250).")] = 10,
        tiers: Tiers = None,
        importance: MinImportance = None,
        from_date: Annotated[
            str | None, Field(description="Only memories from this date on.")
        ] = None,
        to_date: Annotated[str | None, Field(description="Only memories up to this date.")] = None,
    ) -> SearchOutput:
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
        return SearchOutput(memories=rows, consolidation_suggestion=debt.suggestion)

    @catalog.tool(
        title="Search memories by date",
        annotations=READ_ONLY,
        description=(
            "Time-first retrieval: what happened in a period ('last week', 'in February'). "
            "Without a query it lists the window chronologically; with a query it ranks by "
            "relevance within the window. Reflections match when the period they summarize "
            "overlaps the window. When truncated is true, call again with to_date = "
            "returned.from (newest_first) or from_date = returned.to (oldest_first) to read "
            "the next page." + TIER_GUIDE
        ),
    )
    async def date_search_memories(
        from_date: Annotated[
            str, Field(description="Start: ISO date (whole UTC day) or datetime.")
        ],
        to_date: Annotated[str | None, Field(description="End (inclusive); default now.")] = None,
        query: Annotated[
            str | None, Field(max_length=10_000, description="Optional relevance query.")
        ] = None,
        tiers: Tiers = None,
        importance: MinImportance = None,
        max_tokens: Annotated[
            int | None, Field(ge=1000, le=200_000, description="Page budget; default 50,000.")
        ] = None,
        order: Literal["newest_first", "oldest_first"] = "newest_first",
    ) -> DateSearchOutput:
        binding = await resolve()
        binding.require("memories:read")
        async with backend_errors():
            body = schemas.DateSearchRequest.model_validate(
                {
                    "from": from_date,
                    "to": to_date,
                    "query": query,
                    "tiers": tiers,
                    "importance": importance,
                    "max_tokens": max_tokens,
                    "order": order,
                }
            )
            found = await binding.vault.date_search(body)
        return DateSearchOutput(
            memories=found.memories,
            returned=found.returned,
            truncated=found.truncated,
            consolidation_suggestion=found.reflection.suggestion,
        )

    @catalog.tool(
        title="Inspect a memory's lineage",
        annotations=READ_ONLY,
        description=(
            "Show the receipts of a memory. For a reflection (tier 2 or 3): the memories it was "
            "built from, one tier down (500 per call; pass next_offset as offset to read on), "
            "with sources_deleted counting sources removed since. For a raw memory or a tier 2 "
            "reflection: consolidated_into lists the reflections built from it. Chain calls to "
            "drill from an insight down to the exact words."
        ),
    )
    async def inspect_memory(
        memory_id: Annotated[
            str,
            Field(
                min_length=1, max_length=200, description="An id from search results or inspect."
            ),
        ],
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> schemas.InspectResponse:
        binding = await resolve()
        binding.require("memories:read")
        async with backend_errors():
            return await binding.vault.inspect(
                schemas.InspectRequest(memory_id=memory_id, offset=offset)
            )

    @catalog.tool(
        title="Memory status",
        annotations=READ_ONLY,
        description=(
            "Connection and vault status: the vault's reference (never its key), how many "
            "memories each tier holds, the oldest and newest dates, the scopes this connection "
            "was granted, and the reflection debt. When consolidation_suggestion is set, offer "
            "to consolidate with consolidate_memories."
        ),
    )
    async def memory_status() -> StatusOutput:
        binding = await resolve()
        binding.require("memories:read")
        async with backend_errors():
            stats = await binding.vault.stats()
            health = await binding.vault.health()
        return StatusOutput(
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

    @catalog.tool(
        title="Search (connector)",
        annotations=READ_ONLY,
        description=(
            "Search the user's memory and return matching memories as {id, title, url} for "
            "citation; read one in full with fetch. Prefer search_memories when it is available."
        ),
    )
    async def search(
        query: Annotated[str, Field(min_length=1, max_length=10_000)],
    ) -> SearchResults:
        binding = await resolve()
        binding.require("memories:read")
        async with backend_errors():
            found = await binding.vault.search(schemas.SearchRequest(query=query, limit=10))
        return SearchResults(
            results=[
                SearchHit(id=m.id, title=_title(m.content), url=_url(m.id)) for m in found.memories
            ]
        )

    @catalog.tool(
        title="Fetch a memory (connector)",
        annotations=READ_ONLY,
        description=(
            "Return one memory in full (text, tier, dates, importance) by the id a search "
            "result gave, for reading or citing it."
        ),
    )
    async def fetch(id: Annotated[str, Field(min_length=1, max_length=200)]) -> FetchedMemory:
        binding = await resolve()
        binding.require("memories:read")
        async with backend_errors():
            found = await binding.vault.inspect(schemas.InspectRequest(memory_id=id))
        metadata: dict[str, str | int | None] = {
            "tier": found.tier,
            "date": found.date,
            "role": found.role,
            "importance": found.importance,
        }
        if found.covers is not None:
            metadata["covers_from"], metadata["covers_to"] = found.covers.from_, found.covers.to
        return FetchedMemory(
            id=found.memory_id,
            title=_title(found.content),
            text=found.content,
            url=_url(found.memory_id),
            metadata=metadata,
        )
