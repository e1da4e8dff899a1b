"""inspect_memory: a memory's receipts, paged by the result budget, the
sources most similar to the reflection first."""

from __future__ import annotations

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from mcp_memoryrouter import schemas
from mcp_memoryrouter.mcp_server.binding import Vault
from mcp_memoryrouter.mcp_server.budget import (
    ResultBudget,
    largest_fit,
    over_budget,
    shaped,
    trim,
    whole_by,
)
from mcp_memoryrouter.mcp_server.catalog import READ_ONLY, ToolSpec
from mcp_memoryrouter.mcp_server.errors import backend_errors
from mcp_memoryrouter.mcp_server.views import MEMORY_VIEW

SHARES = 4  # a source's text keeps at most a quarter of the budget


class LineageMemory(BaseModel):
    id: str
    tier: int
    content: str
    date: str
    covers: schemas.Covers | None = None
    role: str | None = None
    importance: int | None = None
    score: float | None = None  # cosine similarity to the inspected reflection
    sources_total: int | None = None  # a reflection's sources, and how many were deleted
    sources_deleted: int | None = None
    orphaned: bool | None = None  # every source deleted
    stored_by: schemas.StoredBy | None = None  # what stored it (None: before it was kept)
    # part of the inspected reflection's own evidence: rank, score, whether the entry cited it
    evidence: schemas.EvidenceMark | None = None


class InspectOutput(BaseModel):
    memory_id: str
    tier: int
    content: str
    date: str
    covers: schemas.Covers | None = None
    role: str | None = None
    importance: int | None = None
    sources: list[LineageMemory] | None = None
    sources_total: int | None = None
    sources_deleted: int | None = None
    orphaned: bool | None = None
    truncated: bool | None = None
    offset: int | None = None
    next_offset: int | None = None
    consolidated_into: list[LineageMemory] | None = None
    # what stored it: the surface, the key's id and name, the client (None: before it was kept)
    stored_by: schemas.StoredBy | None = None
    # a reflection: how many of its sources are its own evidence (listed first), and whether
    # no source of its batch supported it well
    evidence_total: int | None = None
    weak_support: bool | None = None


def _rows(rows: list[schemas.LineageRow], budget: ResultBudget) -> list[LineageMemory]:
    cap = budget.text_share(SHARES)
    return [
        LineageMemory(
            id=r.id,
            tier=r.tier,
            content=trim(r.content, cap, whole_by("inspect_memory", r.id)),
            date=r.date,
            covers=r.covers,
            role=r.role,
            importance=r.importance,
            score=r.score,
            sources_total=r.sources_total,
            sources_deleted=r.sources_deleted,
            orphaned=r.orphaned,
            stored_by=r.stored_by,
            evidence=r.evidence,
        )
        for r in rows
    ]


def fit_lineage(
    budget: ResultBudget, found: schemas.InspectResponse, offset: int
) -> CallToolResult:
    """The inspected memory with as many sources as fit; next_offset reads on from there."""
    head = InspectOutput(
        memory_id=found.memory_id,
        tier=found.tier,
        content=trim(found.content, budget.text_share(2), over_budget(budget.tokens)),
        date=found.date,
        covers=found.covers,
        role=found.role,
        importance=found.importance,
        stored_by=found.stored_by,
        evidence_total=found.evidence_total,
        weak_support=found.weak_support,
        consolidated_into=None
        if found.consolidated_into is None
        else _rows(found.consolidated_into, budget),
    )
    if found.sources is None:
        return shaped(head)
    sources = _rows(found.sources, budget)
    present = (found.sources_total or 0) - (found.sources_deleted or 0)

    def build(k: int) -> CallToolResult:
        more = offset + k < present
        return shaped(
            head.model_copy(
                update={
                    "sources": sources[:k],
                    "sources_total": found.sources_total,
                    "sources_deleted": found.sources_deleted,
                    "orphaned": found.orphaned,
                    "truncated": more,
                    "offset": offset,
                    "next_offset": offset + k if more else None,
                }
            )
        )

    return largest_fit(len(sources), build, budget.fits)


async def inspect_memory(
    vault: Vault,
    memory_id: schemas.Id,
    offset: Annotated[int, Field(ge=0)] = 0,
) -> Annotated[CallToolResult, InspectOutput]:
    async with backend_errors():
        found = await vault.client.inspect(
            schemas.InspectRequest.model_construct(
                memory_id=memory_id, offset=offset, order="similarity"
            )
        )
    return fit_lineage(vault.budget, found, offset)


TOOLS = (
    ToolSpec(
        inspect_memory,
        "Inspect a memory's lineage",
        "A memory in full with its receipts. For a reflection (tier 2 or 3): the memories "
        "it was built from, one tier down: its evidence first, then most similar first "
        "(score: cosine); when truncated, pass next_offset as offset to read on. For tier 1 "
        "and 2: consolidated_into lists the reflections built from it. A reflection's "
        "sources_deleted of sources_total says how much of its support was deleted (orphaned: "
        "all of it).",
        READ_ONLY,
        view=MEMORY_VIEW,
    ),
)
