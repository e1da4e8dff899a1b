"""The small SQL dialect every store use case is written in, once for both databases.

A use case receives a :class:`Tx`: one transaction (or read snapshot) on the store's
database. Statements are written with ``?`` placeholders; each database's ``Tx`` runs them
in its own style and supplies the few clauses that differ:

============== ============================== =========================================
               SQLite                         PostgreSQL
============== ============================== =========================================
``among``      ``IN (?, ?, ...)``             ``= ANY(?)`` with one array parameter
``for_update`` nothing (one writer at a time) ``FOR UPDATE [OF t]``: rows a change reads
``skip_locked`` nothing                       ``FOR UPDATE SKIP LOCKED``: a row another
                                              checkout is taking now is passed over
``bytewise``   nothing (BINARY compares bytes) ``COLLATE "C"`` on text that is ordered
``stream``     a plain cursor                 a server-side cursor, fetched in pages
``join_in_order`` ``CROSS JOIN``: the planner  ``JOIN``: the planner orders joins well
               keeps the left table outside
============== ============================== =========================================

Only what truly differs lives in ``store/sqlite`` and ``store/postgres``: connections and
transactions, full-text search (FTS5 and an in-memory BM25 index, or tsvector) and vectors
(numpy, or pgvector).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, Protocol, cast

from mcp_memoryrouter.vault.rules.domain import Memory, Role, Tier, Writer

Row = tuple[Any, ...]
Params = Sequence[Any]

# The columns every memory is read with, in the order :func:`memory_from_row` maps them.
MEMORY_COLUMNS = (
    "m.id, m.tier, m.content, m.tokens, m.date_from, m.date_to, m.role, m.importance, "
    "m.session_id, m.batch_id"
)


def writer_columns(writer: Writer | None) -> tuple[str | None, str | None]:
    """The ``key_id`` and ``key_mode`` a new memory is stored with (both NULL: unknown)."""
    return (None, None) if writer is None else (writer.key_id, writer.mode)


def writer_sql(table: str = "") -> str:
    """What an in-memory index keeps of a row's writer (``IndexRow.writer``): its key id
    when stored in full mode, ``''`` when stored as ``:write`` (never a current key), NULL
    when not known. ``table``: the alias the row is read under (``m.``), if any."""
    return f"CASE {table}key_mode WHEN 'write' THEN '' ELSE {table}key_id END"


class Tx(Protocol):
    """One transaction on a store's database, in its dialect."""

    bytewise: str
    skip_locked: str
    join_in_order: str

    def one(self, sql: str, params: Params = ()) -> Row | None:
        """The first row the statement returns, if any."""
        ...

    def all(self, sql: str, params: Params = ()) -> list[Row]: ...

    def run(self, sql: str, params: Params = ()) -> int:
        """Run a change; the number of rows it changed."""
        ...

    def many(self, sql: str, rows: Sequence[Params]) -> None:
        """Run one statement once per parameter row."""
        ...

    def stream(self, sql: str, params: Params, fetch: int) -> Generator[Row]:
        """The rows a query returns, read ``fetch`` at a time for as long as the caller
        reads on (close the iterator to stop early)."""
        ...

    def among(self, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """A membership test over ``values`` to follow a column (``id {test}``), and its
        parameters."""
        ...

    def for_update(self, of: str | None = None) -> str:
        """The clause that locks the rows a change is about to read (of table ``of``)."""
        ...


def memory_from_row(row: Row, seq: int = 0) -> Memory:
    """A memory from the leading :data:`MEMORY_COLUMNS` of ``row`` (with its storage order
    ``seq`` when the caller read it: search ranks neighbours by it)."""
    return Memory(
        id=cast(str, row[0]),
        tier=cast(Tier, row[1]),
        content=cast(str, row[2]),
        tokens=cast(int, row[3]),
        date_from=cast(int, row[4]),
        date_to=cast(int, row[5]),
        role=cast(Role | None, row[6]),
        importance=cast(int | None, row[7]),
        session_id=cast(str | None, row[8]),
        batch_id=cast(str | None, row[9]),
        seq=seq,
    )
