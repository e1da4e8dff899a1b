"""``mcp-memoryrouter reflect | auto | import | export``: the consolidation loop's commands.

They reach the vault only over its REST API (``--api-url``, ``--key``, or the environment
variables MEMORYROUTER_API_URL and MEMORYROUTER_KEY), so they work against the local server
and a remote one alike. Progress goes to stderr, results to stdout.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import click

from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import MemoryRouterError
from mcp_memoryrouter.reflect.archive import read_archive
from mcp_memoryrouter.reflect.auto import AutoConsolidator, AutoOutcome
from mcp_memoryrouter.reflect.batch import BatchResult
from mcp_memoryrouter.reflect.debt import SourceTier
from mcp_memoryrouter.reflect.export import export_vault
from mcp_memoryrouter.reflect.importer import ImportReport, import_archive
from mcp_memoryrouter.reflect.loop import RunReport, backfill
from mcp_memoryrouter.reflect.models import (
    DEFAULT_TIMEOUT,
    ChatModel,
    CommandModel,
    Model,
    model_key_from,
)

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_API_URL = "http://127.0.0.1:8787"


def register(group: click.Group) -> None:
    for command in (reflect, auto, import_command, export):
        group.add_command(command)


# --- shared options ------------------------------------------------------------------------


def vault_options(command: F) -> F:
    command = click.option(
        "--key",
        envvar="MEMORYROUTER_KEY",
        required=True,
        show_envvar=True,
        help="The memory key of the vault (read-write).",
    )(command)
    return click.option(
        "--api-url",
        envvar="MEMORYROUTER_API_URL",
        default=DEFAULT_API_URL,
        show_default=True,
        show_envvar=True,
        help="The MemoryRouter REST API, local or remote.",
    )(command)


def model_options(command: F) -> F:
    options = [
        click.option(
            "--model-cmd",
            help="A command that reads the model input on stdin and prints the answer.",
        ),
        click.option(
            "--model-url",
            help="An OpenAI-compatible base URL (POST {url}/v1/chat/completions); the key "
            "comes from MEMORYROUTER_MODEL_KEY or OPENAI_API_KEY.",
        ),
        click.option("--model", "model_name", help="The model name for --model-url."),
        click.option(
            "--model-timeout",
            type=click.FloatRange(min=1),
            default=DEFAULT_TIMEOUT,
            show_default=True,
            help="Seconds to wait for one answer.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@dataclass(frozen=True)
class ModelSpec:
    command: str | None
    url: str | None
    name: str | None
    timeout: float

    def check(self) -> None:
        if (self.command is None) == (self.url is None):
            raise click.UsageError("give exactly one of --model-cmd and --model-url")
        if self.url is not None and not self.name:
            raise click.UsageError("--model-url needs --model NAME")
        if self.command is not None:
            try:
                CommandModel(self.command)
            except ValueError as exc:
                raise click.UsageError(f"--model-cmd: {exc}") from exc


@contextlib.asynccontextmanager
async def opened(
    api_url: str, key: str, spec: ModelSpec
) -> AsyncIterator[tuple[VaultClient, Model]]:
    client = VaultClient(api_url, key)
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


def _vault_failure(exc: MemoryRouterError) -> click.ClickException:
    return click.ClickException(f"{type(exc).__name__}: {exc.message}")


# --- reflect -------------------------------------------------------------------------------


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
    model_cmd: str | None,
    model_url: str | None,
    model_name: str | None,
    model_timeout: float,
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
    spec = ModelSpec(model_cmd, model_url, model_name, model_timeout)
    spec.check()
    tiers: tuple[SourceTier, ...] = (1, 2) if tier is None else ((1,) if tier == 1 else (2,))

    async def run() -> list[RunReport]:
        async with opened(api_url, key, spec) as (client, model):
            return [
                await _backfill_with_bar(client, model, t, until_empty, max_batches, max_tokens)
                for t in tiers
            ]

    try:
        reports = anyio.run(run)
    except MemoryRouterError as exc:
        raise _vault_failure(exc) from exc
    for t, report in zip(tiers, reports, strict=True):
        click.echo(json.dumps(_summary(t, report)) if as_json else _summary_line(t, report))
    if any(report.failed for report in reports):
        sys.exit(1)


async def _backfill_with_bar(
    client: VaultClient,
    model: Model,
    tier: SourceTier,
    until_empty: bool,
    max_batches: int | None,
    max_tokens: int | None,
) -> RunReport:
    debt = (await client.stats()).reflection.unconsolidated
    total = debt.raw.units if tier == 1 else debt.tier2.count
    done = {"batches": 0, "memories": 0}

    def status(debt_left: str | None) -> str | None:
        return f"{done['batches']} batches, {done['memories']} memories, debt {debt_left}"

    with click.progressbar(
        length=max(total, 1),
        label=f"tier {tier}",
        file=sys.stderr,
        show_eta=False,
        show_pos=True,
        item_show_func=status,
    ) as bar:

        def advance(result: BatchResult) -> None:
            done["batches"] += 1
            done["memories"] += result.memories if result.committed else 0
            if not result.committed:
                click.echo(
                    f"\nbatch not committed (tier {tier}, {result.memories} memories, left to "
                    f"expire): {result.failure}",
                    err=True,
                )
            bar.update(result.memories if result.committed else 0, _debt_left(result, tier))

        return await backfill(
            client,
            model,
            tier,
            until_empty=until_empty,
            max_batches=max_batches,
            max_tokens=max_tokens,
            on_batch=advance,
        )


def _debt_left(result: BatchResult, tier: SourceTier) -> str:
    if result.reflection is None:
        return "?"
    debt = result.reflection.unconsolidated
    left = debt.raw.importance_equiv if tier == 1 else debt.tier2.importance
    return f"{left} importance"


def _summary(tier: SourceTier, report: RunReport) -> dict[str, Any]:
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


def _summary_line(tier: SourceTier, report: RunReport) -> str:
    s = _summary(tier, report)
    debt = s["debt"] or {"raw_importance": "?", "tier2_importance": "?"}
    return (
        f"tier {tier}: {s['batches']} batches committed, {s['memories']} memories into "
        f"{s['reflections']} reflections, {s['failed_batches']} failed ({s['stopped']}); "
        f"debt left: raw {debt['raw_importance']}, tier 2 {debt['tier2_importance']} importance"
    )


# --- auto ----------------------------------------------------------------------------------


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
def auto(
    api_url: str,
    key: str,
    model_cmd: str | None,
    model_url: str | None,
    model_name: str | None,
    model_timeout: float,
    home: Path | None,
    as_json: bool,
) -> None:
    """One debt-triggered consolidation run, exactly as the connectors do it.

    Reads the vault's debt; runs only when the server suggests consolidation, autoConsolidate
    is not false in config.json, no other run holds ~/.memoryrouter/consolidate.lock and the
    last run completed over 30 minutes ago. At most 3 batches, with a fresh debt check
    between them. Always exits 0: failures go to ~/.memoryrouter/consolidate.log.
    """
    spec = ModelSpec(model_cmd, model_url, model_name, model_timeout)
    spec.check()

    async def run() -> AutoOutcome:
        async with opened(api_url, key, spec) as (client, model):
            return await AutoConsolidator(client, model, home=home).check_and_run()

    outcome = anyio.run(run)
    report = outcome.report
    committed = [b for b in report.batches if b.committed] if report else []
    if as_json:
        body = {
            "status": outcome.status,
            "batches": len(committed),
            "failed_batches": len(report.failed) if report else 0,
            "stopped": report.stopped if report else None,
            "detail": outcome.detail,
        }
        click.echo(json.dumps(body))
    else:
        extra = f": {len(committed)} batches committed ({report.stopped})" if report else ""
        click.echo(f"{outcome.status}{extra}{' ' + outcome.detail if outcome.detail else ''}")


# --- import / export -----------------------------------------------------------------------


@click.command("import")
@vault_options
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def import_command(api_url: str, key: str, file: Path, as_json: bool) -> None:
    """Import a JSONL file: raw messages, or a whole vault written by `export`.

    Each line is {"content": ..., "role"?: ..., "date"?: ..., "session_id"?: ...}; lines
    from `export` also carry tier, importance, covers and sources, and their reflections
    are recreated with their lineage. The whole file is checked first: a bad line stops
    the import before anything is sent, naming the line. Import into an empty vault.
    """
    try:
        with file.open(encoding="utf-8") as lines:
            archive = read_archive(lines)
    except MemoryRouterError as exc:
        raise click.ClickException(f"{file}: {exc.message}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read {file}: {type(exc).__name__}: {exc}") from exc

    async def run() -> ImportReport:
        client = VaultClient(api_url, key)
        try:
            with click.progressbar(
                length=max(archive.size, 1), label="import", file=sys.stderr
            ) as bar:
                return await import_archive(client, archive, on_progress=bar.update)
        finally:
            await client.aclose()

    try:
        report = anyio.run(run)
    except MemoryRouterError as exc:
        raise _vault_failure(exc) from exc
    body = {
        "stored": report.stored,
        "duplicates": report.duplicates,
        "reflections": {str(t): n for t, n in report.reflections.items()},
    }
    if as_json:
        click.echo(json.dumps(body))
    else:
        click.echo(
            f"imported {report.stored} memories ({report.duplicates} duplicates), "
            f"{report.reflections[2]} tier 2 and {report.reflections[3]} tier 3 reflections"
        )


@click.command()
@vault_options
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write here (replaced only once the export is complete) instead of stdout.",
)
def export(api_url: str, key: str, output: Path | None) -> None:
    """Export the whole vault, every tier with its lineage, as JSONL that `import` reads."""

    async def run(write: Callable[[str], object]) -> int:
        client = VaultClient(api_url, key)
        try:
            total = (await client.stats()).total_memories
            with click.progressbar(length=max(total, 1), label="export", file=sys.stderr) as bar:
                return await export_vault(client, write, on_row=lambda: bar.update(1))
        finally:
            await client.aclose()

    try:
        if output is None:
            written = anyio.run(run, sys.stdout.write)
        else:
            partial = output.with_name(output.name + ".partial")
            try:
                with partial.open("w", encoding="utf-8") as sink:
                    written = anyio.run(run, sink.write)
            except BaseException:
                partial.unlink(missing_ok=True)
                raise
            os.replace(partial, output)
    except MemoryRouterError as exc:
        raise _vault_failure(exc) from exc
    click.echo(f"exported {written} memories{f' to {output}' if output else ''}", err=True)
