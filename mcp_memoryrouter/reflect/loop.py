"""The two consolidation loops over :func:`consolidate_batch`.

- :func:`run_triggered` is what connectors run when a response carries the server's debt
  decision: at most three batches, the tier the suggestion names, a fresh debt check
  (``GET /v1/memory/stats``) between batches, and a stop as soon as the suggestion is null.
  It is written as steps (:func:`start_triggered`, then :func:`answer_triggered` with each
  answer of the model) so that the MCP tool ``reflect_memories`` runs the same run with the
  host's model, across requests.
- :func:`backfill` is the historical backfill behind ``mcp-memoryrouter reflect``: the same
  transaction repeated until the debt is below the server's threshold or, with
  ``until_empty``, until checkout answers ``batch_id: null`` (whatever the threshold). It
  keeps no state of its own: the server holds every lease and every consolidated mark, so
  a crashed backfill resumes by running it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from mcp_memoryrouter import schemas
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import ModelFailure
from mcp_memoryrouter.reflect.batch import (
    Ask,
    BatchResult,
    NothingFree,
    Pending,
    answer_batch,
    consolidate_batch,
    model_failed,
    open_batch,
)
from mcp_memoryrouter.reflect.models import Model
from mcp_memoryrouter.reflect.trigger import SourceTier, next_tier, tiers_named

MAX_BATCHES_PER_TRIGGER = 3
MAX_FAILURES_IN_A_ROW = 3

# Why a run ended, named for what happened (docs/consolidation.md lists them for scripts).
Stop = Literal[
    "below_threshold",  # memories wait, but under the server's threshold: it asks for nothing
    "nothing_to_consolidate",  # nothing of the tier (or of any tier) is left unconsolidated
    "all_leased",  # what waits is leased to other batches (another run, or a failed batch)
    "batch_limit",  # the run used all the batches it may
    "batch_failed",  # a batch was left to expire (a triggered run stops at the first)
    "no_tier_named",  # the suggestion names no tier this client knows how to consolidate
]


@dataclass(frozen=True)
class RunReport:
    batches: tuple[BatchResult, ...]
    stopped: Stop
    reflection: schemas.Reflection | None  # the last debt the run saw
    message: str = ""  # checkout's message when it found nothing free

    @property
    def failed(self) -> tuple[BatchResult, ...]:
        return tuple(b for b in self.batches if not b.committed)


@dataclass(frozen=True)
class Triggered:
    """A triggered run between two answers of the model: the batches done so far, the debt
    it last saw, and the batch waiting for an answer."""

    batches: tuple[BatchResult, ...]
    debt: schemas.Reflection
    pending: Pending | None = None
    max_batches: int = MAX_BATCHES_PER_TRIGGER
    max_tokens: int | None = None


@dataclass(frozen=True)
class Waiting:
    """The run needs the model: answer ``prompt``, then call :func:`answer_triggered`."""

    run: Triggered
    prompt: str


Step = Waiting | RunReport
OnBatch = Callable[[BatchResult], None] | None


async def start_triggered(
    client: VaultClient,
    reflection: schemas.Reflection,
    *,
    max_batches: int = MAX_BATCHES_PER_TRIGGER,
    max_tokens: int | None = None,
) -> Step:
    """Begin a run on the server's debt decision ``reflection``."""
    run = Triggered((), reflection, max_batches=max_batches, max_tokens=max_tokens)
    return await _next_batch(client, run, None)


async def answer_triggered(
    client: VaultClient, run: Triggered, answer: str | ModelFailure, on_batch: OnBatch = None
) -> Step:
    """Go on with the model's answer to the pending batch (or the failure that came
    instead of one)."""
    assert run.pending is not None, "answer_triggered needs a run waiting for an answer"
    if isinstance(answer, ModelFailure):
        return await _after_batch(client, run, model_failed(run.pending, answer), on_batch)
    step = await answer_batch(client, run.pending, answer)
    if isinstance(step, Ask):
        return Waiting(replace(run, pending=step.pending), step.prompt)
    return await _after_batch(client, run, step, on_batch)


def waiting(debt: schemas.Reflection, tier: SourceTier | None = None) -> int:
    """How many memories of ``tier`` (both tiers: None) wait to be consolidated, leased or not:
    raw units for tier 1, reflections for tier 2."""
    raw, tier2 = debt.unconsolidated.raw.units, debt.unconsolidated.tier2.count
    return raw + tier2 if tier is None else raw if tier == 1 else tier2


def not_asked(debt: schemas.Reflection, tier: SourceTier | None = None) -> Stop:
    """Why a run the server asks nothing of stops: under its threshold, or nothing waits."""
    return "below_threshold" if waiting(debt, tier) else "nothing_to_consolidate"


async def _nothing_free(
    client: VaultClient, batches: tuple[BatchResult, ...], found: NothingFree
) -> RunReport:
    """Checkout found nothing free: either nothing waits, or all of it is leased. The fresh
    debt tells which (and is the debt the run reports)."""
    debt = (await client.stats()).reflection
    stop: Stop = "all_leased" if waiting(debt, found.tier) else "nothing_to_consolidate"
    return RunReport(batches, stop, debt, found.message)


async def _next_batch(client: VaultClient, run: Triggered, on_batch: OnBatch) -> Step:
    debt = run.debt
    if debt.suggestion is None:
        return RunReport(run.batches, not_asked(debt), debt)
    tier = next_tier(debt.suggestion)
    if tier is None:
        return RunReport(run.batches, "no_tier_named", debt)
    step = await open_batch(client, tier, max_tokens=run.max_tokens)
    if isinstance(step, NothingFree):
        return await _nothing_free(client, run.batches, step)
    if isinstance(step, Ask):
        return Waiting(replace(run, pending=step.pending), step.prompt)
    return await _after_batch(client, run, step, on_batch)


async def _after_batch(
    client: VaultClient, run: Triggered, result: BatchResult, on_batch: OnBatch
) -> Step:
    batches = (*run.batches, result)
    if on_batch is not None:
        on_batch(result)
    if not result.committed:
        return RunReport(batches, "batch_failed", run.debt)
    if len(batches) >= run.max_batches:
        return RunReport(batches, "batch_limit", result.reflection)
    debt = (await client.stats()).reflection
    return await _next_batch(
        client, Triggered(batches, debt, None, run.max_batches, run.max_tokens), on_batch
    )


async def run_triggered(
    client: VaultClient,
    model: Model,
    reflection: schemas.Reflection,
    *,
    max_batches: int = MAX_BATCHES_PER_TRIGGER,
    max_tokens: int | None = None,
    on_batch: OnBatch = None,
) -> RunReport:
    """Consolidate while the server's suggestion asks for it, at most ``max_batches`` times,
    with a model this process calls itself."""
    run = Triggered((), reflection, max_batches=max_batches, max_tokens=max_tokens)
    step = await _next_batch(client, run, on_batch)
    while isinstance(step, Waiting):
        try:
            answer: str | ModelFailure = await model(step.prompt)
        except ModelFailure as exc:
            answer = exc
        step = await answer_triggered(client, step.run, answer, on_batch)
    return step


async def backfill(
    client: VaultClient,
    model: Model,
    tier: SourceTier,
    *,
    until_empty: bool = False,
    max_batches: int | None = None,
    max_tokens: int | None = None,
    on_batch: Callable[[BatchResult], None] | None = None,
    max_failures: int = MAX_FAILURES_IN_A_ROW,
) -> RunReport:
    """Consolidate ``tier`` until its debt is below the server's threshold (or until nothing
    of it is left, with ``until_empty``: a small vault's memories too).

    A failed batch is reported and the loop moves on to the next oldest memories; after
    ``max_failures`` failures in a row (three: the model is clearly not answering) the loop
    stops.
    """
    batches: list[BatchResult] = []
    debt = (await client.stats()).reflection
    failures = 0
    while True:
        if max_batches is not None and len(batches) >= max_batches:
            return RunReport(tuple(batches), "batch_limit", debt)
        if not until_empty and tier not in tiers_named(debt.suggestion):
            return RunReport(tuple(batches), not_asked(debt, tier), debt)
        result = await consolidate_batch(client, model, tier, max_tokens=max_tokens)
        if isinstance(result, NothingFree):
            return await _nothing_free(client, tuple(batches), result)
        batches.append(result)
        if on_batch is not None:
            on_batch(result)
        failures = 0 if result.committed else failures + 1
        if failures >= max_failures:
            return RunReport(tuple(batches), "batch_failed", debt)
        if result.reflection is not None:
            debt = result.reflection
