"""``reflect`` (the historical backfill) and ``auto`` (one debt-triggered run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import click

from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import MemoryRouterError
from mcp_memoryrouter.reflect.auto import AutoConsolidator, AutoOutcome
from mcp_memoryrouter.reflect.batch import BatchResult
from mcp_memoryrouter.reflect.cli.options import (
    ModelSpec,
    model_options,
    opened,
    vault_failure,
    vault_options,
)
from mcp_memoryrouter.reflect.home import default_home
from mcp_memoryrouter.reflect.loop import RunReport, backfill
from mcp_memoryrouter.reflect.models import Model
from mcp_memoryrouter.reflect.trigger import SourceTier


@click.command()
@vault_options
@model_options
@click.option(
    "--tier",
    type=click.IntRange(1, 2),
    default=None,
    help="1: raw memories into reflections; 2: reflections into high-level ones. "
    "Default: tier 1, then tier 2.",
)
@click.option(
    "--until-empty",
    is_flag=True,
    help="Consolidate everything, not only until the server's debt suggestion clears.",
)
@click.option("--max-batches", type=click.IntRange(min=1), help="Stop after N batches per tier.")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    help="Token cap of one batch (the server clamps it to 1,000-200,000).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary per tier.")
def reflect(
    api_url: str,
    key: str,
    model: ModelSpec,
    tier: int | None,
    until_empty: bool,
    max_batches: int | None,
    max_tokens: int | None,
    as_json: bool,
) -> None:
    """Consolidate the vault with your model: a resumable historical backfill.

    Checks out the oldest unconsolidated memories, has the model write reflections from the
    server's instructions, commits them, and repeats: until the server's debt suggestion for
    the tier clears, or with --until-empty until nothing is left. The server keeps all the
    state, so an interrupted run resumes by running the command again. A batch the model
    fails is left uncommitted; its memories return to the pool when the lease runs out.

    Exit status: 0 when every batch was committed, 1 when a batch failed or the vault
    refused, 2 for wrong usage.
    """
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
    """One tier's progress on stderr: memories consolidated, batches, debt left."""

    def __init__(self, tier: SourceTier, total: int) -> None:
        self._tier = tier
        self._batches = self._memories = 0
        self._bar = click.progressbar(
            length=max(total, 1),
            label=f"tier {tier}",
            file=sys.stderr,
            show_eta=False,
            show_pos=True,
            item_show_func=self._status,
        )

    def __enter__(self) -> BackfillBar:
        self._bar.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
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
        "debt": None
        if debt is None
        else {
            "raw_importance": debt.raw.importance_equiv,
            "tier2_importance": debt.tier2.importance,
        },
        "suggestion": report.reflection.suggestion if report.reflection else None,
    }


def summary_line(tier: SourceTier, report: RunReport) -> str:
    s = summary(tier, report)
    debt = s["debt"] or {"raw_importance": "?", "tier2_importance": "?"}
    return (
        f"tier {tier}: {s['batches']} batches committed, {s['memories']} memories into "
        f"{s['reflections']} reflections, {s['failed_batches']} failed ({s['stopped']}); "
        f"debt left: raw {debt['raw_importance']}, tier 2 {debt['tier2_importance']} importance"
    )


@click.command()
@vault_options
@model_options
@click.option(
    "--home",
    envvar="MEMORYROUTER_HOME",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    show_envvar=True,
    help="The directory of the lock, cooldown state, log and config (default ~/.memoryrouter).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def auto(api_url: str, key: str, model: ModelSpec, home: Path | None, as_json: bool) -> None:
    """One debt-triggered consolidation run, exactly as the connectors do it.

    Reads the vault's debt; runs only when the server suggests consolidation, autoConsolidate
    is not false in config.json, no other run holds ~/.memoryrouter/consolidate.lock and the
    last run completed over 30 minutes ago. At most 3 batches, with a fresh debt check
    between them. Always exits 0: failures go to ~/.memoryrouter/consolidate.log.
    """

    async def run() -> AutoOutcome:
        async with opened(api_url, key, model) as (client, writer):
            return await AutoConsolidator(
                client, writer, home=home or default_home()
            ).check_and_run()

    outcome = anyio.run(run)
    click.echo(json.dumps(outcome_body(outcome)) if as_json else outcome_line(outcome))


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
    body = outcome_body(outcome)
    ran = f": {body['batches']} batches committed ({body['stopped']})" if outcome.report else ""
    return f"{outcome.status}{ran}{' ' + outcome.detail if outcome.detail else ''}"
