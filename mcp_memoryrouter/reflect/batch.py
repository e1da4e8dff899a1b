"""One consolidation transaction: check out, let the model write, commit.

The model sees the batch's memories (texts and dates) and the contract's instructions,
nothing else. A malformed answer gets exactly one retry with the validation error appended;
a second bad answer, a failing model or a refused commit leaves the batch uncommitted, so
its lease runs out and the memories return to the pool. Nothing is ever half-committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mcp_memoryrouter import schemas
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import (
    InvalidAnswer,
    InvalidRequest,
    LeaseExpired,
    ModelFailure,
    NotFound,
)
from mcp_memoryrouter.reflect.models import Model
from mcp_memoryrouter.reflect.parse import EntryRules, parse_answer
from mcp_memoryrouter.reflect.prompt import model_input, retry_input
from mcp_memoryrouter.reflect.trigger import SourceTier


@dataclass(frozen=True)
class BatchResult:
    """What became of one checked-out batch. ``failure`` is None when it was committed."""

    tier: SourceTier
    batch_id: str
    memories: int
    reflections: int = 0
    failure: str | None = None
    reflection: schemas.Reflection | None = None  # the debt the commit answered

    @property
    def committed(self) -> bool:
        return self.failure is None


@dataclass(frozen=True)
class NothingFree:
    """Checkout's termination signal: nothing unconsolidated, or all of it leased."""

    tier: SourceTier
    message: str


async def consolidate_batch(
    client: VaultClient, model: Model, tier: SourceTier, *, max_tokens: int | None = None
) -> BatchResult | NothingFree:
    batch = await client.checkout(schemas.CheckoutRequest(tier=tier, max_tokens=max_tokens))
    if batch.batch_id is None:
        return NothingFree(tier, batch.message or "nothing unconsolidated")
    memories = batch.memories or []
    if batch.reflection_contract is None:
        return BatchResult(tier, batch.batch_id, len(memories), failure="no reflection_contract")
    try:
        entries = await write_entries(model, batch.reflection_contract, memories)
    except (ModelFailure, InvalidAnswer) as exc:
        return BatchResult(tier, batch.batch_id, len(memories), failure=_named(exc))
    request = schemas.CommitRequest(
        batch_id=batch.batch_id,
        entries=entries,
    )
    try:
        done = await client.commit(request)
    except (InvalidRequest, LeaseExpired, NotFound) as exc:
        return BatchResult(tier, batch.batch_id, len(memories), failure=_named(exc))
    return BatchResult(
        tier, batch.batch_id, len(memories), len(done.created), reflection=done.reflection
    )


async def write_entries(
    model: Model,
    contract: schemas.ReflectionContract,
    memories: Sequence[schemas.CheckoutMemory],
) -> list[schemas.EntryIn]:
    """The model's entries for ``memories``, after at most one retry."""
    rules = EntryRules.of(contract)
    first = model_input(contract, memories)
    try:
        return parse_answer(await model(first), rules)
    except InvalidAnswer as exc:
        answer = await model(retry_input(first, exc.message))
    try:
        return parse_answer(answer, rules)
    except InvalidAnswer as exc:
        raise InvalidAnswer(f"{exc.message} (after one retry)") from exc


def _named(exc: Exception) -> str:
    """Some exceptions stringify to "": the class name always says what happened."""
    return f"{type(exc).__name__}: {exc}"
