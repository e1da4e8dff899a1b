"""One consolidation transaction: check out, let the model write, commit.

The model sees the batch's memories (texts and dates) and the contract's instructions,
nothing else. A malformed answer gets exactly one retry with the validation error appended;
a second bad answer, a failing model or a refused commit leaves the batch uncommitted, so
its lease runs out and the memories return to the pool. Nothing is ever half-committed.

The transaction is two steps, :func:`open_batch` (a question for the model) and
:func:`answer_batch` (its answer checked and committed), so that whoever holds the model can
drive them: this process calling a model itself (:func:`consolidate_batch`), or the host's
model answering across MCP requests (``mcp_server/tools/reflect.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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


@dataclass(frozen=True)
class Pending:
    """A checked-out batch waiting for the model's answer to ``prompt``. It holds what the
    answer is checked against and the first input (for the one retry), never a source id:
    whoever keeps it between two answers (the MCP tool seals it into the request state)
    needs nothing else."""

    tier: SourceTier
    batch_id: str
    memories: int
    min_entries: int
    max_entries: int
    first_input: str
    retried: bool = False
    labels: tuple[str, ...] = ()  # contract 2: what an entry may replace


@dataclass(frozen=True)
class Ask:
    """The batch needs the model: answer ``prompt``, then call :func:`answer_batch`."""

    pending: Pending
    prompt: str


async def open_batch(
    client: VaultClient, tier: SourceTier, *, max_tokens: int | None = None
) -> Ask | BatchResult | NothingFree:
    """Check out a batch: the question for the model, or why there is none."""
    batch = await client.checkout(
        schemas.CheckoutRequest(tier=tier, max_tokens=max_tokens, contract=2)
    )
    if batch.batch_id is None:
        return NothingFree(tier, batch.message or "nothing unconsolidated")
    memories = batch.memories or []
    contract = batch.reflection_contract
    if contract is None:
        return BatchResult(tier, batch.batch_id, len(memories), failure="no reflection_contract")
    first = model_input(contract, memories)
    pending = Pending(
        tier,
        batch.batch_id,
        len(memories),
        contract.min_entries,
        contract.max_entries,
        first,
        labels=tuple(contract.labels or ()),
    )
    return Ask(pending, first)


async def answer_batch(client: VaultClient, pending: Pending, answer: str) -> Ask | BatchResult:
    """Check the model's answer against the contract and commit it: a malformed first answer
    is asked again once with the validation error appended; a second, or a refused commit,
    leaves the batch uncommitted, so its lease runs out. Nothing is committed half-checked."""
    try:
        rules = EntryRules(
            pending.min_entries, pending.max_entries, pending.labels, pending.memories
        )
        entries = parse_answer(answer, rules)
    except InvalidAnswer as exc:
        if not pending.retried:
            again = replace(pending, retried=True)
            return Ask(again, retry_input(pending.first_input, exc.message))
        failed = InvalidAnswer(f"{exc.message} (after one retry)")
        return model_failed(pending, failed)
    try:
        done = await client.commit(
            schemas.CommitRequest(batch_id=pending.batch_id, entries=entries)
        )
    except (InvalidRequest, LeaseExpired, NotFound) as exc:
        return model_failed(pending, exc)
    return BatchResult(
        pending.tier,
        pending.batch_id,
        pending.memories,
        len(done.created),
        reflection=done.reflection,
    )


def model_failed(pending: Pending, exc: Exception) -> BatchResult:
    """The batch left to expire, and why."""
    return BatchResult(pending.tier, pending.batch_id, pending.memories, failure=_named(exc))


async def consolidate_batch(
    client: VaultClient, model: Model, tier: SourceTier, *, max_tokens: int | None = None
) -> BatchResult | NothingFree:
    """One batch with a model this process calls itself."""
    step = await open_batch(client, tier, max_tokens=max_tokens)
    while isinstance(step, Ask):
        try:
            answer = await model(step.prompt)
        except ModelFailure as exc:
            return model_failed(step.pending, exc)
        step = await answer_batch(client, step.pending, answer)
    return step


def _named(exc: Exception) -> str:
    """Some exceptions stringify to "": the class name always says what happened."""
    return f"{type(exc).__name__}: {exc}"
