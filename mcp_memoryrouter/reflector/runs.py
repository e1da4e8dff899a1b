"""When the server's reflector runs, and what one run does.

- **On the suggestion.** A write whose answer carries the debt suggestion (``VaultAPI.ingest``,
  by a key that may check out) wakes :meth:`ServerReflector.noticed`; a run starts in the
  background unless this process already runs that vault. The run checks the debt afresh
  and runs :func:`~mcp_memoryrouter.reflect.loop.run_triggered` (at most three batches, a
  fresh debt check between them, the contract verbatim, no id to the model).
- **One run per vault, across replicas.** A run first holds the vault in the store for
  :data:`~mcp_memoryrouter.limits.REFLECTOR_RUN_SECONDS` (one statement, shared on
  PostgreSQL); a triggered run also waits out the vault's cooldown or backoff there, and a
  vault its owner turned the reflector off for is never held.
- **After a run.** A run that committed waits the cooldown before the next triggered one; a
  failed run (a provider down, slow, rate limited or answering garbage: its batch left to
  expire, nothing committed) waits the backoff, doubled per failure in a row, at least the
  provider's ``Retry-After``. The outcome, the error and the provider's tokens are kept in
  the store (stats, usage) and logged, never with the key.
- **Now.** :meth:`ServerReflector.run_now` (``POST /v1/memory/consolidate/run``) runs at
  once whatever the cooldown, and below the threshold too: a tier 1 backfill until nothing
  is left, at most three batches of ``max_tokens``, stopping at the first failure.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import anyio.to_thread

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.client import Carrier, VaultClient
from mcp_memoryrouter.errors import Conflict, MemoryRouterError, ModelFailure
from mcp_memoryrouter.reflect.loop import (
    MAX_BATCHES_PER_TRIGGER,
    RunReport,
    backfill,
    run_triggered,
)
from mcp_memoryrouter.reflector.provider import Metered, ProviderFailure, ProviderModel
from mcp_memoryrouter.words import counted

log = logging.getLogger("mcp_memoryrouter.reflector")
A = TypeVar("A", contravariant=True)
INTERNAL_URL = "http://vault.internal"  # never dialled: every call the run makes is carried
REFUSED_SECONDS = 60.0  # after the store refused a triggered run, writes do not ask again
QUIET_VAULTS = 10_000  # past this many remembered vaults, the expired ones are forgotten


class Vault(Carrier, Protocol):
    """One vault, called in process with the access that woke the reflector
    (``vault.http.inprocess.ActingFor``): a client's carrier, and the run's hold."""

    @property
    def vault_id(self) -> str: ...

    def claim(self, holder: str, hold_ms: int, *, triggered: bool) -> int | None: ...

    def finish(
        self,
        holder: str,
        outcome: str,
        error: str | None,
        done: tuple[int, int],
        calls: Sequence[tuple[int, int]],
        wait_ms: int,
    ) -> None: ...


@dataclass(frozen=True)
class Timing:
    """How long a vault waits between runs (the settings; defaults in limits.py)."""

    cooldown_seconds: float = limits.REFLECTOR_COOLDOWN_SECONDS
    backoff_seconds: float = limits.REFLECTOR_BACKOFF_SECONDS
    backoff_max_seconds: float = limits.REFLECTOR_BACKOFF_MAX_SECONDS
    hold_seconds: float = limits.REFLECTOR_RUN_SECONDS

    def wait(self, report: RunReport | None, failures: int, retry_after: float | None) -> float:
        """Seconds before the next triggered run: the backoff after a failure (doubled per
        failure in a row before it, at least ``retry_after``), the cooldown after a run that
        committed, none after a run that found nothing to do."""
        if report is None or report.failed:
            backoff = min(self.backoff_max_seconds, self.backoff_seconds * 2.0 ** min(failures, 30))
            return max(backoff, retry_after or 0.0)
        return self.cooldown_seconds if report.batches else 0.0


@dataclass(frozen=True)
class Ran:
    """One run's end: its report (None when the vault could not be reached), the error
    that failed it, and the provider's ``Retry-After``."""

    report: RunReport | None
    error: str | None
    retry_after: float | None = None


class ServerReflector(Generic[A]):
    """The server's reflector: ``vault_of`` turns the access the front hands over (``A``)
    into the vault it acts on."""

    configured = True

    def __init__(
        self,
        model: ProviderModel,
        vault_of: Callable[[A], Vault],
        timing: Timing | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock`` (seconds) is what this process waits a vault's cooldown or backoff by
        (the store's hold, by the vault's own clock, stays the authority)."""
        self._model = model
        self._clock = clock
        self._vault_of = vault_of
        self.timing = timing or Timing()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._busy: set[str] = set()  # vaults this process runs now
        # vaults a write need not wake before then (``clock`` seconds): the cooldown or the
        # backoff this process set, or a while after the store refused a run (another
        # replica's, or the vault turned off), so that writes past the threshold do not
        # each ask the store; the store's hold stays the one authority
        self._quiet: dict[str, float] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Runs start while the server runs (its lifespan); unfinished ones are cancelled
        at shutdown (their batches' leases run out, their hold too)."""
        self._loop = asyncio.get_running_loop()
        try:
            yield
        finally:
            self._loop = None
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.wait(list(self._tasks))
            await self._model.aclose()

    # --- the front's side (vault.http.front.Consolidator) ------------------------------

    def noticed(self, access: A) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        vault = self._vault_of(access)
        loop.call_soon_threadsafe(self._start, vault)

    def run_now(self, access: A, max_tokens: float | None) -> schemas.ConsolidateRunResponse:
        loop = self._loop
        if loop is None:
            raise Conflict("the server is not running its reflector yet: try again")
        vault = self._vault_of(access)
        return asyncio.run_coroutine_threadsafe(self.now(vault, max_tokens), loop).result()

    # --- runs --------------------------------------------------------------------------

    def _start(self, vault: Vault) -> None:
        vault_id = vault.vault_id
        if vault_id in self._busy or self._loop is None:
            return
        if self._quiet.get(vault_id, 0.0) > self._clock():
            return
        self._busy.add(vault.vault_id)
        task = self._loop.create_task(self._triggered(vault))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _triggered(self, vault: Vault) -> None:
        try:
            ran = await self.run(vault, triggered=True)
            if ran is None:
                self._quiet_for(vault.vault_id, min(REFUSED_SECONDS, self.timing.cooldown_seconds))
        except Exception:  # a background run never takes the server down
            log.exception("reflector: vault %s: the run failed unexpectedly", vault.vault_id)
        finally:
            self._busy.discard(vault.vault_id)

    async def now(self, vault: Vault, max_tokens: float | None) -> schemas.ConsolidateRunResponse:
        """Consolidate ``vault`` now: what was done, or why nothing was (409, 502)."""
        tokens = limits.CONSOLIDATE_NOW_TOKENS if max_tokens is None else max_tokens
        capped = int(min(max(tokens, limits.CHECKOUT_TOKENS_MIN), limits.CHECKOUT_TOKENS_MAX))
        ran = await self.run(vault, triggered=False, max_tokens=capped)
        if ran is None:
            raise Conflict(
                "a run of the server's reflector is consolidating this vault now (or its owner "
                "just turned it off): see GET /v1/memory/consolidate/server, and try again "
                "in a few minutes",
                {"reason": "running"},
            )
        return _answer(ran)

    async def run(
        self, vault: Vault, *, triggered: bool, max_tokens: int | None = None
    ) -> Ran | None:
        """One run on ``vault``: None when it may not run now (held, cooling down, turned
        off)."""
        holder = uuid.uuid4().hex
        hold_ms = int(self.timing.hold_seconds * 1000)
        failures = await anyio.to_thread.run_sync(
            lambda: vault.claim(holder, hold_ms, triggered=triggered)
        )
        if failures is None:
            return None
        model = Metered(self._model)
        ran = await self._consolidate(vault, model, triggered, max_tokens)
        report = ran.report
        wait = self.timing.wait(report, failures, ran.retry_after)
        committed = [] if report is None else [b for b in report.batches if b.committed]
        done = (len(committed), sum(b.reflections for b in committed))
        outcome = "failed" if report is None else report.stopped
        await anyio.to_thread.run_sync(
            lambda: vault.finish(holder, outcome, ran.error, done, model.calls, int(wait * 1000))
        )
        _logged(vault.vault_id, ran, done, wait)
        self._quiet_for(vault.vault_id, wait)
        return ran

    def _quiet_for(self, vault_id: str, seconds: float) -> None:
        now = self._clock()
        if len(self._quiet) >= QUIET_VAULTS:
            self._quiet = {v: until for v, until in self._quiet.items() if until > now}
        self._quiet[vault_id] = now + seconds

    async def _consolidate(
        self, vault: Vault, model: Metered, triggered: bool, max_tokens: int | None
    ) -> Ran:
        client = VaultClient(INTERNAL_URL, carrier=vault, surface="reflector")  # stored_by
        try:
            debt = (await client.stats()).reflection
            if debt.suggestion is not None:
                report = await run_triggered(client, model, debt, max_tokens=max_tokens)
            elif triggered:
                report = RunReport((), "below_threshold", debt)
            else:
                report = await backfill(
                    client,
                    model,
                    1,
                    until_empty=True,
                    max_batches=MAX_BATCHES_PER_TRIGGER,
                    max_tokens=max_tokens,
                    max_failures=1,
                )
        except MemoryRouterError as exc:  # the vault refused (a key revoked since, a 503)
            return Ran(None, _short(f"{type(exc).__name__}: {exc.message}"))
        finally:
            await client.aclose()
        failed = report.failed
        error = _short(failed[-1].failure or "") if failed else None
        return Ran(report, error, model.retry_after)


def _answer(ran: Ran) -> schemas.ConsolidateRunResponse:
    report = ran.report
    if report is None:
        raise ModelFailure(f"the server's reflector could not run: {ran.error}")
    committed = [b for b in report.batches if b.committed]
    if report.failed and not committed:
        details = {} if ran.retry_after is None else {"retry_after": ran.retry_after}
        raise ModelFailure(
            f"the server's reflector failed and committed nothing ({ran.error}); the batch's "
            "lease runs out and its memories wait for the next run: try again later",
            details,
        )
    reflections = sum(b.reflections for b in committed)
    memories = sum(b.memories for b in committed)
    message = (
        f"{counted(len(committed), 'batch', 'batches')} committed: "
        f"{counted(reflections, 'reflection', 'reflections')} of "
        f"{counted(memories, 'memory', 'memories')}"
        if committed
        else report.message or _NOTHING.get(report.stopped, report.stopped)
    )
    assert report.reflection is not None
    return schemas.ConsolidateRunResponse(
        batches=len(committed),
        reflections=reflections,
        memories=memories,
        stopped=report.stopped,
        message=message,
        reflection=report.reflection,
    )


_NOTHING = {
    "nothing_to_consolidate": "nothing to consolidate: every memory is consolidated already",
    "all_leased": "what waits is leased to another consolidation run: try again later",
}


def _short(text: str) -> str:
    return text[: limits.REFLECTOR_ERROR_CHARS]


def _logged(vault_id: str, ran: Ran, done: tuple[int, int], wait: float) -> None:
    if ran.error is not None:
        log.warning(
            "reflector: vault %s: %s; next run in %.0f s at the earliest", vault_id, ran.error, wait
        )
        return
    stopped = "?" if ran.report is None else ran.report.stopped
    log.info(
        "reflector: vault %s: batches %d, reflections %d, stopped: %s",
        vault_id,
        *done,
        stopped,
    )


__all__ = ["ProviderFailure", "ServerReflector", "Timing", "Vault"]
