"""Automatic consolidation, as every connector does it in the background.

A run starts only on the server's own debt decision (a non-null ``reflection.suggestion``
on a response the connector already received), never on a threshold of ours, and only
when all of these allow it:

- ``autoConsolidate`` is not ``false`` in ``~/.memoryrouter/config.json``;
- the last completed run ended at least 30 minutes ago (``consolidate.state``);
- this process gets the machine-wide lock (``consolidate.lock``, stale after 20 minutes).

The run itself is :func:`run_triggered` (at most three batches). Whatever happens, the
caller gets an :class:`AutoOutcome` and never an exception; failures go to
``consolidate.log``. :func:`watch` repeats the check on an interval (``auto --watch``), for
hosts without hooks.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio

from mcp_memoryrouter import schemas
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.reflect.batch import BatchResult
from mcp_memoryrouter.reflect.home import Clock, Home, RunLog
from mcp_memoryrouter.reflect.lock import MachineLock
from mcp_memoryrouter.reflect.loop import (
    MAX_BATCHES_PER_TRIGGER,
    RunReport,
    not_asked,
    run_triggered,
)
from mcp_memoryrouter.reflect.models import Model

COOLDOWN_SECONDS = 30 * 60

Status = Literal[
    "ran",  # a run took place (see ``report`` for its batches, committed or not)
    "below_threshold",  # memories wait, under the server's threshold: its suggestion is null
    "nothing_to_consolidate",  # nothing at all waits to be consolidated
    "disabled",  # autoConsolidate is false (or the config file is unreadable)
    "cooling_down",  # the last run completed less than 30 minutes ago
    "locked",  # another session or connector holds the machine-wide lock
    "failed",  # something unexpected happened; it is in consolidate.log
]


@dataclass(frozen=True)
class AutoOutcome:
    status: Status
    report: RunReport | None = None
    detail: str = ""


class AutoConsolidator:
    def __init__(
        self,
        client: VaultClient,
        model: Model,
        *,
        home: Path,
        clock: Clock = time.time,
        max_batches: int = MAX_BATCHES_PER_TRIGGER,
        max_tokens: int | None = None,
    ) -> None:
        self._client = client
        self._model = model
        self._home = Home(home)
        self._clock = clock
        self._max_batches = max_batches
        self._max_tokens = max_tokens
        self._log = RunLog(self._home.log, clock)

    async def run_if_due(self, reflection: schemas.Reflection | None) -> AutoOutcome:
        """Consolidate when the debt block of a response asks for it and nothing forbids."""
        if reflection is None:
            return AutoOutcome("below_threshold", detail="the response carried no debt")
        if reflection.suggestion is None:
            return _not_due(reflection)
        return await self._guarded(lambda: _given(reflection))

    async def check_and_run(self) -> AutoOutcome:
        """Read the debt (``GET /v1/memory/stats``) first, then as :meth:`run_if_due`."""
        return await self._guarded(self._fetch_debt)

    # --- plumbing ----------------------------------------------------------------------

    async def _fetch_debt(self) -> schemas.Reflection:
        return (await self._client.stats()).reflection

    async def _guarded(self, debt_of: Callable[[], Awaitable[schemas.Reflection]]) -> AutoOutcome:
        try:
            return await self._gate_and_run(debt_of)
        except Exception as exc:  # the top-level boundary: failures stay invisible
            self._log.write(f"run failed: {type(exc).__name__}: {exc}")
            return AutoOutcome("failed", detail=f"{type(exc).__name__}: {exc}")

    async def _gate_and_run(
        self, debt_of: Callable[[], Awaitable[schemas.Reflection]]
    ) -> AutoOutcome:
        if not self._enabled():
            return AutoOutcome("disabled")
        if self._cooling_down():
            return AutoOutcome("cooling_down")
        debt = await debt_of()
        if debt.suggestion is None:
            return _not_due(debt)
        lock = MachineLock(self._home.lock, self._clock)
        if not lock.acquire():
            return AutoOutcome("locked")
        try:
            # Another process may have completed a run between our check and our lock.
            if self._cooling_down():
                return AutoOutcome("cooling_down")
            return AutoOutcome("ran", await self._run(debt, lock))
        finally:
            lock.release()

    async def _run(self, debt: schemas.Reflection, lock: MachineLock) -> RunReport:
        self._log.write(f"run started: {debt.suggestion}")
        try:
            report = await run_triggered(
                self._client,
                self._model,
                debt,
                max_batches=self._max_batches,
                max_tokens=self._max_tokens,
                on_batch=lambda result: self._after_batch(result, lock),
            )
        except anyio.get_cancelled_exc_class():
            # Stopped from outside (``auto --watch`` on SIGTERM): the model command is killed
            # and the open batch never committed; its lease returns the memories to the pool.
            # Not a completed run, so no cooldown follows.
            self._log.write("run abandoned: stopped; an open batch's lease will expire")
            raise
        except Exception:
            self._home.record_completed(self._clock())
            raise
        self._home.record_completed(self._clock())
        suggestion = report.reflection.suggestion if report.reflection else None
        self._log.write(
            f"run ended ({report.stopped}): {len(report.batches)} batches, "
            f"debt now: {suggestion or 'below threshold'}"
        )
        return report

    def _after_batch(self, result: BatchResult, lock: MachineLock) -> None:
        lock.refresh()
        if result.committed:
            self._log.write(
                f"batch committed: tier {result.tier}, {result.memories} memories, "
                f"{result.reflections} reflections"
            )
        else:
            self._log.write(
                f"batch {result.batch_id} not committed (tier {result.tier}, "
                f"{result.memories} memories; its lease will expire): {result.failure}"
            )

    def _enabled(self) -> bool:
        try:
            return self._home.auto_consolidate()
        except ValueError as exc:
            self._log.write(f"automatic consolidation off: unreadable config: {exc}")
            return False

    def _cooling_down(self) -> bool:
        last = self._home.last_completed()
        return last is not None and self._clock() - last < COOLDOWN_SECONDS


async def _given(reflection: schemas.Reflection) -> schemas.Reflection:
    return reflection


def _not_due(debt: schemas.Reflection) -> AutoOutcome:
    """No run: the server asks for none. Say what waits, so that "below the threshold" is
    never read as "nothing to do"."""
    if not_asked(debt) == "nothing_to_consolidate":
        return AutoOutcome("nothing_to_consolidate")
    waiting = debt.unconsolidated
    return AutoOutcome(
        "below_threshold",
        detail=f"{waiting.raw.units} raw memories and {waiting.tier2.count} reflections wait, "
        f"under the server's threshold ({waiting.raw.importance_equiv} and "
        f"{waiting.tier2.importance} of {debt.threshold_importance} importance)",
    )


DEFAULT_WATCH_SECONDS = 300.0


async def watch(
    consolidator: AutoConsolidator,
    interval: float,
    report: Callable[[AutoOutcome], None],
) -> None:
    """``auto --watch``: :meth:`AutoConsolidator.check_and_run` now and every ``interval``
    seconds after each check ends, for hosts without hooks. Each check honours the opt-out,
    the cooldown and the lock as a single ``auto`` does; ``report`` hears every outcome.
    Runs until cancelled (the command cancels it on SIGTERM or SIGINT): a run in progress is
    abandoned, its model command killed, and nothing of its open batch committed."""
    while True:
        report(await consolidator.check_and_run())
        await anyio.sleep(interval)
