"""consolidate_memories and commit_reflections: the consolidation round trip inside a chat.

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

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.mcp.binding import Vault
from mcp_memoryrouter.mcp.budget import SETTING, Budget, shaped
from mcp_memoryrouter.mcp.catalog import WRITES, WRITES_IDEMPOTENT, ToolSpec
from mcp_memoryrouter.mcp.errors import backend_errors
from mcp_memoryrouter.tokens import est_tokens

CONTRACT_TOKENS = 1_100  # the contract, sent twice, until a checkout has measured it


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


async def consolidate_memories(
    vault: Vault,
    tier: Literal[1, 2] = 1,
    max_tokens: Annotated[
        int | None,
        Field(
            ge=limits.CHECKOUT_TOKENS_MIN,
            le=limits.CHECKOUT_TOKENS_MAX,
            description="Batch size; smaller gives tighter lineage.",
        ),
    ] = None,
) -> Annotated[CallToolResult, ConsolidateOutput]:
    budget, smallest = vault.budget, limits.CHECKOUT_TOKENS_MIN
    reserved = vault.contract_tokens.get(tier, CONTRACT_TOKENS)
    if budget.content_tokens(None, reserved) < smallest:
        raise ToolError(
            f"result_too_large: the smallest batch ({smallest} tokens) with its contract does "
            f"not fit this server's {budget.tokens}-token result budget ({SETTING}); ask the "
            f"operator to raise it to at least {reserved + smallest * 5 // 2}."
        )
    async with backend_errors():
        batch = await vault.client.checkout(
            schemas.CheckoutRequest.model_construct(
                tier=tier, max_tokens=budget.content_tokens(max_tokens, reserved)
            )
        )
    if batch.reflection_contract is not None:
        measured = est_tokens(batch.reflection_contract.model_dump_json())
        vault.contract_tokens[tier] = 2 * measured + 100
    return batch_result(budget, batch)


async def commit_reflections(
    vault: Vault, batch_id: schemas.Id, entries: schemas.Entries
) -> Annotated[CallToolResult, CommitOutput]:
    async with backend_errors():
        done = await vault.client.commit(
            schemas.CommitRequest.model_construct(batch_id=batch_id, entries=entries)
        )
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


TOOLS = (
    ToolSpec(
        consolidate_memories,
        "Check out memories to consolidate",
        "Start a consolidation: lease the oldest unconsolidated memories (tier 1 into tier "
        "2 reflections; tier=2: tier 2 into tier 3) and get their texts, dates and the "
        "reflection_contract. Write the entries following reflection_contract.instructions "
        "exactly, then call commit_reflections with the batch_id before the lease expires. "
        "batch_id null: nothing left to consolidate.",
        WRITES,
    ),
    ToolSpec(
        commit_reflections,
        "Commit reflections",
        "Finish a consolidation: submit the entries written for a consolidate_memories "
        f"batch, each text plus integer importance {limits.IMPORTANCE_MIN}-"
        f"{limits.IMPORTANCE_MAX} (never ids or numbers in the text). Committing a batch "
        "again writes nothing twice. An expired lease is refused: check out again.",
        WRITES_IDEMPOTENT,
    ),
)
