"""``import --from server-memory|mem0|basic-memory|letta`` and ``export --to
server-memory|markdown``: moving in from another memory product, and out to one (see
:mod:`mcp_memoryrouter.transfer.moving`). Their options and help are in :mod:`.commands`."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import click

from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import MemoryRouterError
from mcp_memoryrouter.reflect.cli.options import vault_failure
from mcp_memoryrouter.reflect.cli.transfer import progress, sending, to_file
from mcp_memoryrouter.transfer.graph import read_graph, write_graph
from mcp_memoryrouter.transfer.letta import read_letta
from mcp_memoryrouter.transfer.mem0 import read_mem0
from mcp_memoryrouter.transfer.moving import Moved, MoveReport, import_moved
from mcp_memoryrouter.transfer.notes import read_notes, write_notes
from mcp_memoryrouter.words import counted

_READERS: dict[str, Callable[[Path], Moved]] = {
    "server-memory": read_graph,
    "mem0": read_mem0,
    "basic-memory": read_notes,
    "letta": read_letta,
}


def run_moving_in(api_url: str, key: str, path: Path, product: str, as_json: bool) -> None:
    """The whole input read and checked, then sent; what was stored, skipped and why."""
    moved = _read(path, product)
    now_ms = int(time.time() * 1000)
    report = sending(
        api_url,
        key,
        moved.size,
        lambda client, advance: import_moved(client, moved, now_ms, on_progress=advance),
    )
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(report)))
    else:
        click.echo(summary(report, moved.noun))


def _read(path: Path, product: str) -> Moved:
    try:
        return _READERS[product](path)
    except MemoryRouterError as exc:
        raise click.ClickException(exc.message) from exc
    except OSError as exc:
        raise click.ClickException(f"cannot read {path}: {type(exc).__name__}: {exc}") from exc


def summary(report: MoveReport, noun: tuple[str, str]) -> str:
    """``imported 12 memories from 3 entities (0 duplicates); skipped: …; …``"""
    text = (
        f"imported {counted(report.stored, 'memory', 'memories')} from "
        f"{counted(report.sessions, *noun)} of {report.product} "
        f"({counted(report.duplicates, 'duplicate', 'duplicates')})"
    )
    if report.skipped:
        text += "; skipped: " + ", ".join(f"{n} {why}" for why, n in report.skipped.items())
    if report.undated:
        text += f"; {counted(report.undated, 'memory', 'memories')} without a date in the file"
        dates = []
        if report.import_date is not None:
            dates.append(f"the import's ({report.import_date})")
        if report.dated_earlier:
            dates.append(f"{report.dated_earlier} that of an earlier import")
        text += " took " + " and ".join(dates)
    return text


# --- out ---------------------------------------------------------------------------------


def run_export_to(api_url: str, key: str, output: Path | None, target: str) -> None:
    """``export --to server-memory`` (stdout, or a new private file) or ``--to markdown`` (a
    new folder, moved into place once complete)."""
    try:
        if target == "server-memory":
            said = _graph(api_url, key, output)
        else:
            if output is None:
                raise click.UsageError("--to markdown writes a folder: give it with --output DIR")
            said = _notes(api_url, key, output)
    except MemoryRouterError as exc:
        raise vault_failure(exc) from exc
    click.echo(said, err=True)


async def _lines(api_url: str, key: str) -> list[dict[str, Any]]:
    client = VaultClient(api_url, key, surface="import")  # stored_by
    try:
        total = (await client.stats()).total_memories
        lines = []
        with progress(total, "export") as advance:
            async for line in client.export_lines():
                lines.append(line)
                advance(1)
        return lines
    finally:
        await client.aclose()


def _graph(api_url: str, key: str, output: Path | None) -> str:
    if output is not None and output.is_dir():
        raise click.ClickException(f"{output} is a folder: give --output a file's path")
    counts: list[tuple[int, int]] = []

    async def run(write: Callable[[str], object]) -> int:
        counts.append(write_graph(await _lines(api_url, key), write))
        return counts[-1][0]

    anyio.run(run, sys.stdout.write) if output is None else to_file(run, output)
    entities, relations = counts[-1]
    where = f" to {output}" if output else ""
    return (
        f"exported {counted(entities, 'entity', 'entities')} and "
        f"{counted(relations, 'relation', 'relations')}{where}"
    )


def _notes(api_url: str, key: str, output: Path) -> str:
    if output.exists() or output.is_symlink():
        raise click.ClickException(
            f"{output} already exists: --to markdown makes a new folder; give a path that "
            "does not exist yet"
        )
    partial = output.with_name(output.name + ".partial")
    try:
        partial.mkdir(mode=0o700)
    except FileExistsError as exc:
        raise click.ClickException(
            f"{partial} already exists (left by an interrupted export?): look at it, remove "
            "it, and run the export again"
        ) from exc
    try:
        written = write_notes(anyio.run(_lines, api_url, key), partial)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    os.replace(partial, output)
    return f"exported {counted(written, 'note', 'notes')} to {output}"
