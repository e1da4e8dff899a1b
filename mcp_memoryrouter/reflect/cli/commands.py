"""``reflect``, ``auto``, ``import`` and ``export``: what each command takes, and its help.

Every ``--help`` and every wrong usage is answered from here, so this module imports click
and the options alone. What a command does is in :mod:`.consolidate` and :mod:`.transfer`
(the client, the loop, the readers), imported when the command runs: importing them here
made ``--version`` pay for pydantic, the HTTP client and the model adapters
(``bench/cli_startup.py``).
"""

from __future__ import annotations

from pathlib import Path

import click

from mcp_memoryrouter.reflect.cli.options import (
    WATCH_SECONDS,
    ModelSpec,
    model_options,
    vault_options,
)
from mcp_memoryrouter.transfer.history import SOURCES


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
    from mcp_memoryrouter.reflect.cli import consolidate  # imported as it runs

    consolidate.run_reflect(
        api_url, key, model, tier, until_empty, max_batches, max_tokens, as_json
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
@click.option(
    "--watch",
    is_flag=True,
    help="Keep running: check the debt now and every --interval seconds, until SIGTERM or "
    "Ctrl-C (for hosts without hooks).",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=1),
    default=WATCH_SECONDS,
    show_default=True,
    help="With --watch: seconds from the end of one debt check to the next.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def auto(
    api_url: str,
    key: str,
    model: ModelSpec,
    home: Path | None,
    watch: bool,
    interval: float,
    as_json: bool,
) -> None:
    """One debt-triggered consolidation run, exactly as the connectors do it.

    Reads the vault's debt; runs only when the server suggests consolidation, autoConsolidate
    is not false in config.json, no other run holds ~/.memoryrouter/consolidate.lock and the
    last run completed over 30 minutes ago. At most 3 batches, with a fresh debt check
    between them. Always exits 0: failures go to ~/.memoryrouter/consolidate.log.

    With --watch it does that again every --interval seconds (one line, or one JSON object,
    per check) until SIGTERM or Ctrl-C, then exits 0 at once: a run in progress is
    abandoned, its model command stopped and its open batch left uncommitted (the lease
    returns those memories to the pool).
    """
    from mcp_memoryrouter.reflect.cli import consolidate  # imported as it runs

    consolidate.run_auto(api_url, key, model, home, as_json, interval if watch else None)


# the memory products `import --from` moves in from (transfer.moving.PRODUCTS)
PRODUCTS = ("server-memory", "mem0", "basic-memory", "letta")


@click.command("import")
@vault_options
@click.argument("file", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--from",
    "source",
    type=click.Choice(["archive", *SOURCES, *PRODUCTS]),
    default="archive",
    show_default=True,
    help="What FILE is: a JSONL archive; a ChatGPT or Claude data export (the zip the "
    "service sent, or the conversations.json inside it); server-memory's memory.jsonl; "
    "mem0's JSON or OpenMemory's backup zip; basic-memory's folder of notes; Letta's agent "
    "file (.af) or memory folder.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def import_command(api_url: str, key: str, file: Path, source: str, as_json: bool) -> None:
    """Import a JSONL file (raw messages, or a whole vault written by `export`), or a chat
    history exported by ChatGPT or Claude (--from chatgpt|claude FILE).

    JSONL: each line is {"content": ..., "role"?: ..., "date"?: ..., "session_id"?: ...};
    lines from `export` also carry tier, importance, covers and sources, and their
    reflections are recreated with their lineage: such an archive goes into an empty vault
    only (refused before anything is sent otherwise). Plain lines go into any vault.

    A chat history: FILE is the zip the service sent (read in memory, nothing extracted)
    or the conversations.json inside it. The user's and the assistant's messages of each
    conversation, in the order and on the branch last shown, with their dates, one session
    per conversation (chatgpt-ID, claude-ID). System, tool and hidden messages and
    attachments are skipped and counted. Importing the same file again stores nothing new,
    so an interrupted import is resumed by running it again.

    Moving in from another memory product (--from server-memory|mem0|basic-memory|letta
    FILE or FOLDER): its facts, notes and core memory become raw memories of role
    observation, one session per entity, user, note or agent (server-memory-NAME, …), with
    the file's dates, else the import's (said in the summary). Again, it stores nothing new.

    The whole file is checked first: a bad line or conversation stops the import before
    anything is sent, naming it.
    """
    from mcp_memoryrouter.reflect.cli import moved_in, transfer  # imported as they run

    if source in PRODUCTS:
        moved_in.run_moving_in(api_url, key, file, source, as_json)
    else:
        transfer.run_import(api_url, key, file, source, as_json)


@click.command()
@vault_options
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path),
    default=None,
    help="Write here instead of stdout: a new file readable by you alone (0600), moved into "
    "place only once the export is complete. A symbolic link there is refused, never followed. "
    "With --to markdown: the folder to make (it must not exist yet).",
)
@click.option(
    "--to",
    "target",
    type=click.Choice(["archive", "server-memory", "markdown"]),
    default="archive",
    show_default=True,
    help="archive: the JSONL `import` reads; server-memory: a memory.jsonl knowledge graph "
    "that server-memory loads; markdown: a new folder (--output) of notes, one per session "
    "and one per reflection, with front matter basic-memory reads.",
)
def export(api_url: str, key: str, output: Path | None, target: str) -> None:
    """Export the whole vault, every tier with its lineage, as JSONL that `import` reads
    (or, --to, as a server-memory graph or a folder of Markdown notes)."""
    from mcp_memoryrouter.reflect.cli import moved_in, transfer  # imported as they run

    if target == "archive":
        transfer.run_export(api_url, key, output)
    else:
        moved_in.run_export_to(api_url, key, output, target)
