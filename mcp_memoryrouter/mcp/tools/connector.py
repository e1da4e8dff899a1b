"""The search/fetch pair (memories:read) ChatGPT connectors and deep research require, in
the shapes they expect."""

from __future__ import annotations

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from mcp_memoryrouter import schemas
from mcp_memoryrouter.mcp.binding import Resolver
from mcp_memoryrouter.mcp.budget import largest_fit, over_budget, shaped, trim
from mcp_memoryrouter.mcp.tools import READ_ONLY, Catalog, backend_errors


class SearchHit(BaseModel):
    id: str
    title: str
    url: str


class SearchResults(BaseModel):
    results: list[SearchHit]
    omitted: int = 0


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


def _metadata(found: schemas.InspectResponse) -> dict[str, str | int | None]:
    metadata: dict[str, str | int | None] = {
        "tier": found.tier,
        "date": found.date,
        "role": found.role,
        "importance": found.importance,
    }
    if found.covers is not None:
        metadata["covers_from"], metadata["covers_to"] = found.covers.from_, found.covers.to
    return metadata


def register(catalog: Catalog, resolve: Resolver) -> None:
    budget = catalog.budget

    @catalog.tool(
        title="Search (connector)",
        annotations=READ_ONLY,
        description=(
            "Search the user's memory; returns {id, title, url} per match for citation. Read "
            "one with fetch. Prefer search_memories where available."
        ),
    )
    async def search(
        query: Annotated[str, Field(min_length=1, max_length=10_000)],
    ) -> Annotated[CallToolResult, SearchResults]:
        binding = await resolve()
        binding.require("memories:read")
        async with backend_errors():
            found = await binding.vault.search(schemas.SearchRequest(query=query, limit=10))
        hits = [SearchHit(id=m.id, title=_title(m.content), url=_url(m.id)) for m in found.memories]
        return largest_fit(
            len(hits),
            lambda k: shaped(SearchResults(results=hits[:k], omitted=len(hits) - k)),
            budget.fits,
        )

    @catalog.tool(
        title="Fetch a memory (connector)",
        annotations=READ_ONLY,
        description="Return one memory in full (text, tier, dates, importance) by a search id.",
    )
    async def fetch(
        id: Annotated[str, Field(min_length=1, max_length=200)],
    ) -> Annotated[CallToolResult, FetchedMemory]:
        binding = await resolve()
        binding.require("memories:read")
        async with backend_errors():
            found = await binding.vault.inspect(schemas.InspectRequest(memory_id=id))
        return shaped(
            FetchedMemory(
                id=found.memory_id,
                title=_title(found.content),
                text=trim(found.content, budget.text_share(1), over_budget(budget.tokens)),
                url=_url(found.memory_id),
                metadata=_metadata(found),
            )
        )
