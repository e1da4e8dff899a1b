"""The search/fetch pair ChatGPT connectors and deep research require, in
the shapes they expect."""

from __future__ import annotations

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import BaseModel

from mcp_memoryrouter import schemas
from mcp_memoryrouter.mcp_server.binding import Vault
from mcp_memoryrouter.mcp_server.budget import largest_fit, over_budget, shaped, trim
from mcp_memoryrouter.mcp_server.catalog import READ_ONLY, ToolSpec
from mcp_memoryrouter.mcp_server.errors import backend_errors


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
    metadata: dict[str, str | int | None]


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


async def search(vault: Vault, query: schemas.Query) -> Annotated[CallToolResult, SearchResults]:
    async with backend_errors():
        found = await vault.client.search(
            schemas.SearchRequest.model_construct(query=query, limit=10)
        )
    hits = [SearchHit(id=m.id, title=_title(m.content), url=_url(m.id)) for m in found.memories]
    return largest_fit(
        len(hits),
        lambda k: shaped(SearchResults(results=hits[:k], omitted=len(hits) - k)),
        vault.budget.fits,
    )


async def fetch(vault: Vault, id: schemas.Id) -> Annotated[CallToolResult, FetchedMemory]:
    async with backend_errors():
        found = await vault.client.inspect(schemas.InspectRequest.model_construct(memory_id=id))
    budget = vault.budget
    return shaped(
        FetchedMemory(
            id=found.memory_id,
            title=_title(found.content),
            text=trim(found.content, budget.text_share(1), over_budget(budget.tokens)),
            url=_url(found.memory_id),
            metadata=_metadata(found),
        )
    )


TOOLS = (
    ToolSpec(
        search,
        "Search (connector)",
        "Search the user's memory; returns {id, title, url} per match for citation. Read "
        "one with fetch. Prefer search_memories where available.",
        READ_ONLY,
    ),
    ToolSpec(
        fetch,
        "Fetch a memory (connector)",
        "Return one memory in full (text, tier, dates, importance) by a search id.",
        READ_ONLY,
    ),
)
