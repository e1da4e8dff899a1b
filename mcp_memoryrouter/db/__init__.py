"""Everything the server stores, on SQLite or PostgreSQL, goes through this package: the
connections and pools, the small SQL dialect statements are written in, and one migration
runner. The vault's store (``vault/store``), the authorization server's state and the
explorer's sessions stand on it; only here are ``sqlite3``, ``psycopg`` and ``psycopg_pool``
imported.

A caller works in a :class:`Tx`: one transaction (or read snapshot) on one database.
Statements are written with ``?`` placeholders; each database's ``Tx`` runs them in its own
style and supplies the few clauses that differ:

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
``lock``       nothing (one writer at a time) ``pg_advisory_xact_lock``: held to commit
============== ============================== =========================================

- :mod:`.sqlite` connections in WAL mode, the ``Tx``, and a small database of one
  connection behind a lock (state files beside the vault);
- :mod:`.postgres` the ``Tx``, the pools (built in one place), and a database over a pool;
- :mod:`.migrations` numbered scripts per database, applied once each and recorded.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

Row = tuple[Any, ...]
Record = dict[str, Any]  # a row by column name
Params = Sequence[Any]


class Tx(Protocol):
    """One transaction on a database, in its dialect."""

    bytewise: str
    skip_locked: str
    join_in_order: str

    def one(self, sql: str, params: Params = ()) -> Row | None:
        """The first row the statement returns, if any."""
        ...

    def all(self, sql: str, params: Params = ()) -> list[Row]: ...

    def records(self, sql: str, params: Params = ()) -> list[Record]:
        """The rows a query returns, each by column name."""
        ...

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

    def by_key(self, column: str) -> str:
        """``column`` in a condition of rows found by their key (``id {test}``): SQLite's
        ``+column``, which keeps its planner, without statistics, from reading every row of
        the vault through an index on ``column`` instead of looking the keys up (9 ms
        against 0.1 for 20 ids among 10,000 memories); the column itself elsewhere."""
        ...

    def for_update(self, of: str | None = None) -> str:
        """The clause that locks the rows a change is about to read (of table ``of``)."""
        ...

    def lock(self, key: int) -> None:
        """Wait for every other transaction holding ``key``; held until this one ends."""
        ...


class Database(Protocol):
    """A database small state lives in (not the vault's: its stores keep their own
    connections, for their indexes and retries)."""

    # Whether a statement waits on another machine (a network round trip, a database that
    # may stall): callers on the event loop then run it on a worker thread.
    remote: bool

    def transaction(self) -> AbstractContextManager[Tx]:
        """One transaction: committed when the block ends, rolled back when it raises."""
        ...

    def statement(self) -> AbstractContextManager[Tx]:
        """A ``Tx`` whose statements each commit on their own (no transaction around)."""
        ...

    def close(self) -> None: ...


def records_of(description: Sequence[Any] | None, rows: Sequence[Row]) -> list[Record]:
    """``rows`` by column name (a cursor's ``description``)."""
    names = [column[0] for column in description or ()]
    return [dict(zip(names, row, strict=True)) for row in rows]
