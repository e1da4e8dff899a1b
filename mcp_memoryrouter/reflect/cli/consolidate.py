"""What ``reflect`` (the historical backfill) and ``auto`` (one debt-triggered run) do; their
options and help are in :mod:`.commands`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import click

from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import MemoryRouterError
from mcp_memoryrouter.reflect.auto import AutoConsolidator, AutoOutcome, watch
from mcp_memoryrouter.reflect.batch import BatchResult
from mcp_memoryrouter.reflect.cli.options import ModelSpec, vault_failure
from mcp_memoryrouter.reflect.home import default_home
from mcp_memoryrouter.reflect.loop import MAX_FAILURES_IN_A_ROW, RunReport, backfill, waiting
from mcp_memoryrouter.reflect.models import ChatModel, CommandModel, Model, model_key_from
from mcp_memoryrouter.reflect.trigger import SourceTier
from mcp_memoryrouter.words import counted


def run_reflect(
    api_url: str,
    key: str,
    model: ModelSpec,
    tier: int | None,
    until_empty: bool,
    max_batches: int | None,
    max_tokens: int | None,
    as_json: bool,
) -> None:
    """``reflect``: the backfill of the tier asked (default 1, then 2), a summary per tier."""
    tiers: tuple[SourceTier, ...] = (1, 2) if tier is None else ((1,) if tier == 1 else (2,))

    async def run() -> list[RunReport]:
        async with opened(api_url, key, model) as (client, writer):
            return [
                await _backfill(client, writer, t, until_empty, max_batches, max_tokens)
                for t in tiers
            ]

    try:
        reports = anyio.run(run)
    except MemoryRouterError as exc:
        raise vault_failure(exc) from exc
    for t, report in zip(tiers, reports, strict=True):
        click.echo(json.dumps(summary(t, report)) if as_json else summary_line(t, report))
    if any(report.failed for report in reports):
        sys.exit(1)


async def _backfill(
    client: VaultClient,
    model: Model,
    tier: SourceTier,
    until_empty: bool,
    max_batches: int | None,
    max_tokens: int | None,
) -> RunReport:
    debt = (await client.stats()).reflection.unconsolidated
    with BackfillBar(tier, debt.raw.units if tier == 1 else debt.tier2.count) as bar:
        return await backfill(
            client,
            model,
            tier,
            until_empty=until_empty,
            max_batches=max_batches,
            max_tokens=max_tokens,
            on_batch=bar.advance,
        )


class BackfillBar:
    """One tier's progress on stderr when it is a terminal (a log or a pipe would get the
    bar's label alone, on a line of its own): memories consolidated, batches, debt left.
    A batch left uncommitted is said either way."""

    def __init__(self, tier: SourceTier, total: int) -> None:
        self._tier = tier
        self._batches = self._memories = 0
        self._bar = (
            click.progressbar(
                length=max(total, 1),
                label=f"tier {tier}",
                file=sys.stderr,
                show_eta=False,
                show_pos=True,
                item_show_func=self._status,
            )
            if sys.stderr.isatty()
            else None
        )

    def __enter__(self) -> BackfillBar:
        if self._bar is not None:
            self._bar.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(kind, error, trace)

    def advance(self, result: BatchResult) -> None:
        self._batches += 1
        if not result.committed:
            click.echo(
                f"\nbatch not committed (tier {self._tier}, {result.memories} memories, left "
                f"to expire): {result.failure}",
                err=True,
            )
            return
        self._memories += result.memories
        if self._bar is not None:
            self._bar.update(result.memories, _debt_left(result, self._tier))

    def _status(self, debt_left: str | None) -> str:
        return f"{self._batches} batches, {self._memories} memories, debt {debt_left or '?'}"


def _debt_left(result: BatchResult, tier: SourceTier) -> str:
    if result.reflection is None:
        return "?"
    debt = result.reflection.unconsolidated
    return f"{debt.raw.importance_equiv if tier == 1 else debt.tier2.importance} importance"


def summary(tier: SourceTier, report: RunReport) -> dict[str, Any]:
    committed = [b for b in report.batches if b.committed]
    debt = report.reflection.unconsolidated if report.reflection else None
    return {
        "tier": tier,
        "batches": len(committed),
        "memories": sum(b.memories for b in committed),
        "reflections": sum(b.reflections for b in committed),
        "failed_batches": len(report.failed),
        "stopped": report.stopped,
        "waiting": None if report.reflection is None else waiting(report.reflection, tier),
        "debt": None
        if debt is None
        else {
            "raw_importance": debt.raw.importance_equiv,
            "tier2_importance": debt.tier2.importance,
        },
        "suggestion": report.reflection.suggestion if report.reflection else None,
    }


def summary_line(tier: SourceTier, report: RunReport) -> str:
    """One tier's run in words: what was committed, why it stopped, and what to do next."""
    s = summary(tier, report)
    done = (
        f"tier {tier}: {counted(s['batches'], 'batch', 'batches')} committed, "
        f"{counted(s['memories'], 'memory', 'memories')} into "
        f"{counted(s['reflections'], 'reflection', 'reflections')}"
    )
    if s["failed_batches"]:
        done += f", {counted(s['failed_batches'], 'batch', 'batches')} failed"
    return f"{done}; {report.stopped}: {_why_stopped(tier, report)}"


def _why_stopped(tier: SourceTier, report: RunReport) -> str:
    noun = "raw memories" if tier == 1 else "reflections"
    debt = report.reflection
    if debt is None:
        return "the vault's debt is unknown"
    left = f"{waiting(debt, tier)} {noun}"
    importance = (
        debt.unconsolidated.raw.importance_equiv
        if tier == 1
        else debt.unconsolidated.tier2.importance
    )
    return {
        "below_threshold": f"{left} wait, under the server's threshold ({importance} of "
        f"{debt.threshold_importance} importance); --until-empty consolidates them now",
        "nothing_to_consolidate": f"no {noun} left to consolidate",
        "all_leased": f"the {left} left are leased to other batches (another run's, or a "
        "failed batch's until its lease runs out): run again later",
        "batch_limit": f"--max-batches reached, {left} wait",
        "batch_failed": f"{MAX_FAILURES_IN_A_ROW} batches failed in a row (why: above), "
        f"{left} wait",
        "no_tier_named": "the server's suggestion names no tier this client consolidates",
    }[report.stopped]


def run_auto(
    api_url: str,
    key: str,
    model: ModelSpec,
    home: Path | None,
    as_json: bool,
    watch_interval: float | None = None,
) -> None:
    """``auto``: one debt-triggered run, as the connectors do it, or with ``watch_interval``
    one check every so many seconds until SIGTERM or SIGINT; always exits 0."""

    def report(outcome: AutoOutcome) -> None:
        if as_json:
            click.echo(json.dumps(outcome_body(outcome)))
        elif watch_interval is None:
            click.echo(outcome_line(outcome))
        else:
            click.echo(f"{_now()} {outcome_line(outcome)}")

    async def run() -> None:
        async with opened(api_url, key, model) as (client, writer):
            consolidator = AutoConsolidator(client, writer, home=home or default_home())
            if watch_interval is None:
                report(await consolidator.check_and_run())
                return
            async with anyio.create_task_group() as group:
                group.start_soon(_stop_on_signal, group.cancel_scope, as_json)
                await watch(consolidator, watch_interval, report)

    anyio.run(run)


async def _stop_on_signal(scope: anyio.CancelScope, as_json: bool) -> None:
    """The first SIGTERM or SIGINT cancels the watch: it returns, and the command exits 0."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for received in signals:
            if not as_json:
                click.echo(f"{_now()} stopped: {signal.Signals(received).name}")
            scope.cancel()
            return


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def outcome_body(outcome: AutoOutcome) -> dict[str, Any]:
    report = outcome.report
    return {
        "status": outcome.status,
        "batches": sum(b.committed for b in report.batches) if report else 0,
        "failed_batches": len(report.failed) if report else 0,
        "stopped": report.stopped if report else None,
        "detail": outcome.detail,
    }


def outcome_line(outcome: AutoOutcome) -> str:
    """The outcome in words; below the threshold, the command that consolidates now."""
    body = outcome_body(outcome)
    if outcome.report:
        ran = f"{counted(body['batches'], 'batch', 'batches')} committed"
        if body["failed_batches"]:
            ran += f", {counted(body['failed_batches'], 'batch', 'batches')} failed"
        return f"ran: {ran}; stopped: {body['stopped']}"
    if outcome.status == "below_threshold":
        return (
            f"below_threshold: {outcome.detail}. To consolidate them now: "
            "mcp-memoryrouter reflect --until-empty (with --model-cmd or --model-url)"
        )
    return f"{outcome.status}{': ' + outcome.detail if outcome.detail else ''}"


@contextlib.asynccontextmanager
async def opened(
    api_url: str, key: str, spec: ModelSpec
) -> AsyncIterator[tuple[VaultClient, Model]]:
    """The vault client and the model, closed on the way out."""
    client = VaultClient(api_url, key, surface="consolidator")  # stored_by
    try:
        if spec.command is not None:
            yield client, CommandModel(spec.command, timeout=spec.timeout)
            return
        chat = ChatModel(
            spec.url or "", spec.name or "", model_key_from(os.environ), timeout=spec.timeout
        )
        try:
            yield client, chat
        finally:
            await chat.aclose()
    finally:
        await client.aclose()
