"""Reflection tools (memories:reflect): the consolidation round trip inside a chat.

The model sees texts, dates and the server's contract; never a memory id. The batch id is
the lease ticket, and the server builds all lineage itself. A batch is checked out to fit
the result budget with its contract: it cannot be trimmed afterwards, since the reflections
committed for it cover all of it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from mcp_memoryrouter import schemas
from mcp_memoryrouter.mcp.binding import Resolver
from mcp_memoryrouter.mcp.budget import SETTING, Budget, shaped
from mcp_memoryrouter.mcp.tools import WRITES, WRITES_IDEMPOTENT, Catalog, backend_errors
from mcp_memoryrouter.tokens import est_tokens

CONTRACT_TOKENS = 1_100  # the contract, sent twice, until a checkout has measured it
MIN_BATCH_TOKENS = 1_000  # the smallest batch cap the vault accepts (it clamps up to it)


class BatchMemory(BaseModel):
    text: str
    date: str


class ConsolidateOutput(BaseModel):
    batch_id: str | None
    tier: int | None = None
    count: int
    memories: list[BatchMemory] = Field(default_factory=list)
    reflection_contract: schemas.ReflectionContract | None = None
    lease_expires_at: str | None = None
    message: str | None = None


class Entry(BaseModel):
    text: Annotated[
        str,
        Field(min_length=1, max_length=8000, description="Standalone prose; no ids or scores."),
    ]
    importance: Annotated[int, Field(ge=1, le=10, description="1 routine ... 10 defining.")]


class CommitOutput(BaseModel):
    committed: bool
    already_committed: bool
    tier: int  # the tier the new reflections were stored at
    reflections_created: int
    sources_consolidated: int
    reflection: schemas.Reflection
    consolidation_suggestion: str | None = None


def batch_result(budget: Budget, batch: schemas.CheckoutResponse) -> CallToolResult:
    """The batch as the model sees it (no source ids), or a tool error when even the
    smallest batch the vault checks out does not fit the budget."""
    result = shaped(
        ConsolidateOutput(
            batch_id=batch.batch_id,
            tier=batch.tier,
            count=batch.count,
            memories=[BatchMemory(text=m.text, date=m.date) for m in batch.memories or []],
            reflection_contract=batch.reflection_contract,
            lease_expires_at=batch.lease_expires_at,
            message=batch.message,
        )
    )
    if not budget.fits(result):
        raise ToolError(
            f"result_too_large: this batch of {batch.count} memories with its contract needs "
            f"{budget.cost(result)} tokens, over this server's {budget.tokens}-token result "
            f"budget ({SETTING}); ask the operator to raise it. The batch's lease expires on "
            f"its own at {batch.lease_expires_at}."
        )
    return result


def register(catalog: Catalog, resolve: Resolver) -> None:
    budget = catalog.budget
    reserved = {1: CONTRACT_TOKENS, 2: CONTRACT_TOKENS}

    @catalog.tool(
        title="Check out memories to consolidate",
        annotations=WRITES,
        description=(
            "Start a consolidation: lease the oldest unconsolidated memories (tier 1 into tier "
            "2 reflections; tier=2: tier 2 into tier 3) and get their texts, dates and the "
            "reflection_contract. Write the entries following reflection_contract.instructions "
            "exactly, then call commit_reflections with the batch_id before the lease expires. "
            "batch_id null: nothing left to consolidate."
        ),
    )
    async def consolidate_memories(
        tier: Literal[1, 2] = 1,
        max_tokens: Annotated[
            int | None,
            Field(
                ge=MIN_BATCH_TOKENS,
                le=200_000,
                description="Batch size; smaller gives tighter lineage.",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, ConsolidateOutput]:
        binding = await resolve()
        binding.require("memories:reflect")
        size = budget.content_tokens(max_tokens, reserved[tier])
        if budget.content_tokens(None, reserved[tier]) < MIN_BATCH_TOKENS:
            raise ToolError(
                f"result_too_large: the smallest batch ({MIN_BATCH_TOKENS} tokens) with its "
                f"contract does not fit this server's {budget.tokens}-token result budget "
                f"({SETTING}); ask the operator to raise it to at least "
                f"{reserved[tier] + MIN_BATCH_TOKENS * 5 // 2}."
            )
        async with backend_errors():
            batch = await binding.vault.checkout(
                schemas.CheckoutRequest(tier=tier, max_tokens=size)
            )
        if batch.reflection_contract is not None:
            reserved[tier] = 2 * est_tokens(batch.reflection_contract.model_dump_json()) + 100
        return batch_result(budget, batch)

    @catalog.tool(
        title="Commit reflections",
        annotations=WRITES_IDEMPOTENT,
        description=(
            "Finish a consolidation: submit the entries written for a consolidate_memories "
            "batch, each text plus integer importance 1-10 (never ids or numbers in the text). "
            "Committing a batch again writes nothing twice. An expired lease is refused: check "
            "out again."
        ),
    )
    async def commit_reflections(
        batch_id: Annotated[str, Field(min_length=1, max_length=200)],
        entries: Annotated[list[Entry], Field(min_length=1, max_length=100)],
    ) -> Annotated[CallToolResult, CommitOutput]:
        binding = await resolve()
        binding.require("memories:reflect")
        async with backend_errors():
            body = schemas.CommitRequest(
                batch_id=batch_id,
                entries=[schemas.EntryIn(text=e.text, importance=e.importance) for e in entries],
            )
            done = await binding.vault.commit(body)
        return shaped(
            CommitOutput(
                committed=done.committed,
                already_committed=done.already_committed,
                tier=done.tier,
                reflections_created=len(done.created),
                sources_consolidated=done.sources_consolidated,
                reflection=done.reflection,
                consolidation_suggestion=done.reflection.suggestion,
            )
        )
