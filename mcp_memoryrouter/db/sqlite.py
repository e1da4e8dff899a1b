"""SQLite: connections in WAL mode, the dialect's ``Tx``, and a small database of one
connection behind a lock for state files (the vault's store keeps its own writer and
readers, see ``vault/store/sqlite``)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp_memoryrouter.db import Params, Record, Row, records_of
from mcp_memoryrouter.db.migrations import Migrations, migrate_sqlite
from mcp_memoryrouter.private import new_private_dir, private_database

Error = sqlite3.Error
Connection = sqlite3.Connection


def connect(path: Path | str) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are begun explicitly), WAL, waiting up
    to 30 s for another writer."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


def in_memory() -> sqlite3.Connection:
    """A private in-memory database (a tool, such as FTS5's tokenizer, not a store)."""
    return sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE`` transaction: committed when the block ends, rolled back when
    it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class SqliteTx:
    """A transaction on one SQLite connection (see :mod:`mcp_memoryrouter.db`). One writer
    at a time holds the database, so nothing is locked row by row."""

    bytewise = ""  # the BINARY collation compares bytes already
    skip_locked = ""
    join_in_order = "CROSS JOIN"  # SQLite keeps the left table of a CROSS JOIN outermost

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def one(self, sql: str, params: Params = ()) -> Row | None:
        row: Row | None = self.conn.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        return self.conn.execute(sql, params).fetchall()

    def records(self, sql: str, params: Params = ()) -> list[Record]:
        cursor = self.conn.execute(sql, params)
        return records_of(cursor.description, cursor.fetchall())

    def run(self, sql: str, params: Params = ()) -> int:
        return self.conn.execute(sql, params).rowcount

    def many(self, sql: str, rows: Sequence[Params]) -> None:
        self.conn.executemany(sql, rows)

    def stream(self, sql: str, params: Params, fetch: int) -> Generator[Row]:
        cursor = self.conn.execute(sql, params)
        try:
            while batch := cursor.fetchmany(fetch):
                yield from batch
        finally:
            cursor.close()

    def among(self, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"IN ({','.join('?' * len(values))})", list(values)

    def by_key(self, column: str) -> str:
        return "+" + column

    def for_update(self, of: str | None = None) -> str:
        return ""

    def lock(self, key: int) -> None:
        """Nothing to wait for: a transaction holds the only writer."""


class SqliteDatabase:
    """A small database file of its own (0600, in a directory made 0700 if missing), its
    migrations applied on open: one connection behind a lock, since the writes are tiny and
    rare."""

    remote = False

    def __init__(self, path: Path, migrations: Migrations) -> None:
        new_private_dir(path.parent)
        private_database(path)  # before connecting: the WAL takes the file's mode
        self._conn = connect(path)
        self._lock = threading.RLock()
        with self._lock:
            self.version = migrate_sqlite(self._conn, migrations)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def transaction(self) -> Iterator[SqliteTx]:
        with self._lock, immediate(self._conn):
            yield SqliteTx(self._conn)

    @contextmanager
    def statement(self) -> Iterator[SqliteTx]:
        with self._lock:
            yield SqliteTx(self._conn)
