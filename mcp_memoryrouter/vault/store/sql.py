"""What every store use case reads memories with, and where the vault's migrations are.

Use cases are written once, as functions of a :class:`~mcp_memoryrouter.db.Tx` (the dialect
both databases speak, in :mod:`mcp_memoryrouter.db`). Only what truly differs lives in
``store/sqlite`` and ``store/postgres``: transactions and their retries, full-text search
(FTS5 and an in-memory BM25 index, or tsvector) and vectors (numpy, or pgvector).
"""

from __future__ import annotations

from typing import cast

from mcp_memoryrouter.db import Row
from mcp_memoryrouter.db.migrations import Migrations
from mcp_memoryrouter.vault.rules.domain import Memory, WriteMode, Writer

# The vault's schema: applied when a store opens, recorded as it always was (SQLite's
# PRAGMA user_version, PostgreSQL's schema_migrations).
MIGRATIONS = Migrations.of("mcp_memoryrouter.vault.migrations", record="schema_migrations")

# The columns every memory is read with, in the order :func:`memory_from_row` maps them.
MEMORY_COLUMNS = (
    "m.id, m.tier, m.content, m.tokens, m.date_from, m.date_to, m.role, m.importance, "
    "m.session_id, m.batch_id"
)


# What a new memory records of its writer, in the order :func:`writer_columns` gives them.
WRITER_COLUMNS = "key_id, key_mode, key_name, surface, client"


def writer_columns(writer: Writer | None) -> tuple[str | None, ...]:
    """The :data:`WRITER_COLUMNS` a new memory is stored with (all NULL: unknown)."""
    if writer is None:
        return (None, None, None, None, None)
    return (writer.key_id, writer.mode, writer.key_name, writer.surface, writer.client)


def writer_from_row(row: Row) -> Writer | None:
    """A memory's writer from its :data:`WRITER_COLUMNS` (None: stored before kept)."""
    if row[0] is None:
        return None
    key_id, mode, key_name, surface, client = row
    return Writer(
        cast(str, key_id),
        cast(WriteMode, mode),
        cast("str | None", key_name),
        cast("str | None", surface),
        cast("str | None", client),
    )


def writer_sql(table: str = "") -> str:
    """What an in-memory index keeps of a row's writer (``IndexRow.writer``): its key id
    when stored in full mode, ``''`` when stored as ``:write`` (never a current key), NULL
    when not known. ``table``: the alias the row is read under (``m.``), if any."""
    return f"CASE {table}key_mode WHEN 'write' THEN '' ELSE {table}key_id END"


def memory_from_row(row: Row, seq: int = 0) -> Memory:
    """A memory from the leading :data:`MEMORY_COLUMNS` of ``row`` (with its storage order
    ``seq`` when the caller read it: search ranks neighbours by it). The columns are
    :class:`Memory`'s first fields, in its order, passed as they are: a search reads ~150
    rows, and a cast per column (``Role | None`` built and hashed each time) was ~10 % of a
    prepare's CPU."""
    i, tier, content, tokens, start, end, role, importance, session, batch = row[:10]
    return Memory(i, tier, content, tokens, start, end, role, importance, session, batch, seq)
