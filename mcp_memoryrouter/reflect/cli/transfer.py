"""What ``import`` and ``export`` do: a whole vault as JSONL (see :mod:`transfer.archive`) and
back; ``import --from chatgpt|claude``: a chat history (see :mod:`transfer.chat_export`).
Their options and help are in :mod:`.commands`."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import anyio
import click

from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import MemoryRouterError
from mcp_memoryrouter.private import open_private
from mcp_memoryrouter.reflect.cli.options import vault_failure
from mcp_memoryrouter.transfer.archive import Archive, read_archive
from mcp_memoryrouter.transfer.chat_export import looks_like_zip, read_export
from mcp_memoryrouter.transfer.export import export_vault
from mcp_memoryrouter.transfer.history import History, Source
from mcp_memoryrouter.transfer.importer import (
    import_archive,
    import_history,
    plan_history,
)
from mcp_memoryrouter.words import counted


def run_import(api_url: str, key: str, file: Path, source: str, as_json: bool) -> None:
    """``import``: the whole file read and checked, then sent; the counts printed."""
    if file.is_dir():
        raise click.ClickException(
            f"{file} is a folder: --from {source} reads a file (a folder is read by "
            "--from basic-memory and --from letta)"
        )
    if source != "archive":
        _import_history(api_url, key, file, "chatgpt" if source == "chatgpt" else "claude", as_json)
        return
    archive = _read(file)
    report = sending(
        api_url,
        key,
        archive.size,
        lambda client, progress: import_archive(client, archive, on_progress=progress),
    )
    if as_json:
        reflections = {str(tier): n for tier, n in report.reflections.items()}
        body = {"stored": report.stored, "duplicates": report.duplicates}
        click.echo(json.dumps({**body, "reflections": reflections}))
    else:
        tier2, tier3 = report.reflections[2], report.reflections[3]
        click.echo(
            f"imported {counted(report.stored, 'memory', 'memories')} "
            f"({counted(report.duplicates, 'duplicate', 'duplicates')}), "
            f"{counted(tier2 + tier3, 'reflection', 'reflections')} "
            f"({tier2} of tier 2, {tier3} of tier 3)"
        )


R = TypeVar("R")


def sending(
    api_url: str,
    key: str,
    size: int,
    send: Callable[[VaultClient, Callable[[int], None]], Awaitable[R]],
) -> R:
    """``send`` run with a client of the vault, its progress (out of ``size``) shown on
    stderr; a failure the vault reports becomes the command's error."""

    async def run() -> R:
        client = VaultClient(api_url, key)
        try:
            with progress(size, "import") as advance:
                return await send(client, advance)
        finally:
            await client.aclose()

    try:
        return anyio.run(run)
    except MemoryRouterError as exc:
        raise vault_failure(exc) from exc


def _read(file: Path) -> Archive:
    try:
        # one record a line, ended by "\n" alone (JSON leaves U+2028 and U+0085 raw)
        with file.open(encoding="utf-8", newline="\n") as lines:
            return read_archive(lines)
    except MemoryRouterError as exc:
        raise click.ClickException(f"{file}: {exc.message}{_export_hint(file)}") from exc
    except UnicodeDecodeError as exc:
        raise click.ClickException(
            f"{file}: not UTF-8 text (byte {exc.start}): an archive is JSON lines"
            f"{_export_hint(file)}"
        ) from exc
    except OSError as exc:
        raise click.ClickException(f"cannot read {file}: {type(exc).__name__}: {exc}") from exc


def _export_hint(file: Path) -> str:
    """A JSON array, or a zip, is no archive: most likely a chat export given without --from."""
    with contextlib.suppress(OSError):
        if looks_like_zip(file):
            return " (a zip: a ChatGPT or Claude data export? add --from chatgpt or --from claude)"
    with contextlib.suppress(OSError, UnicodeDecodeError), file.open(encoding="utf-8-sig") as f:
        if f.read(64).lstrip().startswith("["):
            return " (a chat export's conversations.json? add --from chatgpt or --from claude)"
    return ""


def _import_history(api_url: str, key: str, file: Path, source: Source, as_json: bool) -> None:
    plan = plan_history(_read_history(file, source))
    report = sending(
        api_url,
        key,
        plan.size,
        lambda client, progress: import_history(client, plan, on_progress=progress),
    )
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(report)))
    else:
        click.echo(
            f"imported {counted(report.stored, 'message', 'messages')} from "
            f"{counted(report.conversations, 'conversation', 'conversations')} "
            f"({counted(report.duplicates, 'duplicate', 'duplicates')}, "
            f"{counted(report.attachments, 'attachment', 'attachments')} skipped, "
            f"{counted(report.system, 'system/tool message', 'system/tool messages')} skipped)"
        )


def _read_history(file: Path, source: Source) -> History:
    """The whole export (its zip, or its conversations.json), parsed and checked; a click
    error names the file and the problem."""
    try:
        return read_export(file, source)
    except MemoryRouterError as exc:
        raise click.ClickException(f"{file}: {exc.message}") from exc
    except OSError as exc:
        raise click.ClickException(f"cannot read {file}: {type(exc).__name__}: {exc}") from exc


def run_export(api_url: str, key: str, output: Path | None) -> None:
    """``export``: every memory to stdout, or to a new private file moved into place."""

    async def run(write: Callable[[str], object]) -> int:
        client = VaultClient(api_url, key)
        try:
            total = (await client.stats()).total_memories
            with progress(total, "export") as advance:
                return await export_vault(client, write, on_row=lambda: advance(1))
        finally:
            await client.aclose()

    if output is not None and output.is_dir():
        raise click.ClickException(f"{output} is a folder: give --output a file's path")
    try:
        written = anyio.run(run, sys.stdout.write) if output is None else to_file(run, output)
    except MemoryRouterError as exc:
        raise vault_failure(exc) from exc
    where = f" to {output}" if output else ""
    click.echo(f"exported {counted(written, 'memory', 'memories')}{where}", err=True)


@contextlib.contextmanager
def progress(length: int, label: str) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr when it is a terminal; nothing otherwise: a log or a pipe
    would get the bar's label alone, on a line of its own."""
    if not sys.stderr.isatty():
        yield lambda _: None
        return
    with click.progressbar(length=max(length, 1), label=label, file=sys.stderr) as bar:
        yield bar.update


def to_file(run: Callable[[Callable[[str], object]], Awaitable[int]], output: Path) -> int:
    """Write beside ``output`` (a new file, 0600, never through a link) and move it into
    place only once the export is complete."""
    if output.is_symlink():
        raise click.ClickException(
            f"{output} is a symbolic link: export writes a new file, readable by you alone, "
            "and follows no link; remove the link or give --output the file's own path"
        )
    partial = output.with_name(output.name + ".partial")
    try:
        fd = open_private(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW)
    except FileExistsError as exc:
        raise click.ClickException(
            f"{partial} already exists (left by an interrupted export, or put there by "
            "someone else; export never writes through it): look at it, remove it, and run "
            "the export again"
        ) from exc
    except OSError as exc:
        raise click.ClickException(f"cannot write {partial}: {type(exc).__name__}: {exc}") from exc
    try:
        with open(fd, "w", encoding="utf-8") as sink:
            written = anyio.run(run, sink.write)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, output)
    return written
