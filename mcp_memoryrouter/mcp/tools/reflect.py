"""Reflection tools (memories:reflect): the consolidation round trip inside a chat.

The model sees texts, dates and the server's contract; never a memory id. The batch id is
the lease ticket, and the server builds all lineage itself.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from mcp_memoryrouter import schemas
from mcp_memoryrouter.mcp.binding import Resolver
from mcp_memoryrouter.mcp.tools import Catalog, backend_errors


class BatchMemory(BaseModel):
    text: str
    date: str


class ConsolidateOutput(BaseModel):
    batch_id: str | None = Field(description="The lease ticket to pass to commit_reflections.")
    tier: int | None = None
    count: int
    memories: list[BatchMemory] = Field(default_factory=list)
    reflection_contract: schemas.ReflectionContract | None = Field(
        default=None, description="Follow instructions exactly; entries must match entry_schema."
    )
    lease_expires_at: str | None = None
    message: str | None = None


class Entry(BaseModel):
    text: Annotated[
        str,
        Field(
            min_length=1,
            max_length=8000,
            description="Clean standalone prose; no ids or scores inline.",
        ),
    ]
    importance: Annotated[int, Field(ge=1, le=10, description="1 routine ... 10 defining.")]


class CommitOutput(BaseModel):
    committed: bool
    already_committed: bool
    tier: int = Field(description="The tier the new reflections were stored at.")
    reflections_created: int
    sources_consolidated: int
    reflection: schemas.Reflection
    consolidation_suggestion: str | None = None


def register(catalog: Catalog, resolve: Resolver) -> None:
    @catalog.tool(
        title="Check out memories to consolidate",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
        description=(
            "Start a consolidation: lease the oldest unconsolidated memories (tier 1 raw "
            "memories into tier 2 reflections, or tier 2 into tier 3 with tier=2) and get "
            "their texts, dates and the reflection_contract. Then write the entries yourself, "
            "following reflection_contract.instructions exactly, and call commit_reflections "
            "with the batch_id within the lease. batch_id null means nothing is left to "
            "consolidate."
        ),
    )
    async def consolidate_memories(
        tier: Literal[1, 2] = 1,
        max_tokens: Annotated[
            int | None, Field(ge=1000, le=200_000, description="Smaller batches, tighter lineage.")
        ] = None,
    ) -> ConsolidateOutput:
        binding = await resolve()
        binding.require("memories:reflect")
        async with backend_errors():
            batch = await binding.vault.checkout(
                schemas.CheckoutRequest(tier=tier, max_tokens=max_tokens)
            )
        # Only texts, dates and the contract: source ids never reach the model.
        return ConsolidateOutput(
            batch_id=batch.batch_id,
            tier=batch.tier,
            count=batch.count,
            memories=[BatchMemory(text=m.text, date=m.date) for m in batch.memories or []],
            reflection_contract=batch.reflection_contract,
            lease_expires_at=batch.lease_expires_at,
            message=batch.message,
        )

    @catalog.tool(
        title="Commit reflections",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
        description=(
            "Finish a consolidation: submit the entries you wrote for a batch from "
            "consolidate_memories. Each entry is text plus an integer importance 1-10; never "
            "put ids or numbers for importance in the text. Committing the same batch again "
            "is safe and writes nothing twice. An expired lease is refused: check out again."
        ),
    )
    async def commit_reflections(
        batch_id: Annotated[str, Field(min_length=1, max_length=200)],
        entries: Annotated[list[Entry], Field(min_length=1, max_length=100)],
    ) -> CommitOutput:
        binding = await resolve()
        binding.require("memories:reflect")
        async with backend_errors():
            body = schemas.CommitRequest(
                batch_id=batch_id,
                entries=[schemas.EntryIn(text=e.text, importance=e.importance) for e in entries],
            )
            done = await binding.vault.commit(body)
        return CommitOutput(
            committed=done.committed,
            already_committed=done.already_committed,
            tier=done.tier,
            reflections_created=len(done.created),
            sources_consolidated=done.sources_consolidated,
            reflection=done.reflection,
            consolidation_suggestion=done.reflection.suggestion,
        )
