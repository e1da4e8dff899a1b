"""Where the authorization server and the explorer keep their state: a SQLite file of their
own in the data directory (one process), or the shared PostgreSQL (any number of replicas).

Both speak the same SQL, written with ``?`` placeholders and ``{p}`` before each table name
(empty on SQLite, ``oauth_`` on PostgreSQL), and ``INSERT … ON CONFLICT … DO UPDATE`` for
upserts (SQLite 3.24+). A one-time use (a code, a refresh token) is one ``UPDATE … WHERE
used = 0`` whose row count decides, which is atomic on both: on PostgreSQL a concurrent
second update waits for the first's row lock and then finds the row used.

These tables are created at start with ``CREATE TABLE IF NOT EXISTS``, on PostgreSQL under a
transaction-scoped advisory lock so replicas starting together do not race. They are not
vault migrations: the authorization server is a client of the vault and never touches its
schema, and the vault never reads these tables.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio.to_thread

from mcp_memoryrouter.private import new_private_dir, private_database

Row = Mapping[str, Any]
T = TypeVar("T")

# pg_advisory_xact_lock key for creating these tables: "MROAUTH"
_SCHEMA_LOCK = 0x4D524F41555448
POSTGRES_PREFIX = "oauth_"


class Database(Protocol):
    """Statements in the shared dialect; ``atomic()`` runs several in one transaction."""

    def one(self, sql: str, *args: Any) -> Row | None: ...

    def all(self, sql: str, *args: Any) -> list[Row]: ...

    def run(self, sql: str, *args: Any) -> int: ...

    def atomic(self) -> Any: ...  # a context manager yielding a Database

    # Whether a statement waits on another machine (a network round trip, a database that
    # may stall): callers on the event loop then run it on a worker thread (off_loop).
    remote: bool


async def off_loop(remote: bool, work: Callable[[], T]) -> T:
    """``work()``, on a worker thread when it waits on a remote database: an event loop that
    waits for PostgreSQL stalls every request of the replica, while a SQLite statement on a
    local file takes microseconds and is cheaper run in place than handed to a thread."""
    if not remote:
        return work()
    return await anyio.to_thread.run_sync(work)


class SqliteDatabase:
    """One connection behind a lock: the writes are tiny and rare."""

    remote = False

    def __init__(self, path: Path, schema: str) -> None:
        new_private_dir(path.parent)
        private_database(path)  # before connecting: the WAL takes the file's mode
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(schema.replace("{p}", ""))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def one(self, sql: str, *args: Any) -> Row | None:
        with self._lock:
            row: Row | None = self._db.execute(sql.replace("{p}", ""), args).fetchone()
            return row

    def all(self, sql: str, *args: Any) -> list[Row]:
        with self._lock:
            return list(self._db.execute(sql.replace("{p}", ""), args).fetchall())

    def run(self, sql: str, *args: Any) -> int:
        with self._lock:
            return self._db.execute(sql.replace("{p}", ""), args).rowcount

    @contextmanager
    def atomic(self) -> Iterator[SqliteDatabase]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")


@lru_cache(maxsize=256)
def native(sql: str, prefix: str) -> str:
    """A statement of the shared dialect as psycopg runs it on PostgreSQL."""
    return sql.replace("{p}", prefix).replace("%", "%%").replace("?", "%s")


def postgres_ddl(schema: str, prefix: str) -> str:
    """SQLite's ``REAL`` is a double; PostgreSQL's is single precision (seconds since 1970
    would lose minutes)."""
    return schema.replace("{p}", prefix).replace(" REAL", " DOUBLE PRECISION")


WAIT_SECONDS = 5.0  # the longest a connection, a checkout or a statement may take


class PostgresPool:
    """A small connection pool to the shared database, for the authorization server's and
    the explorer's state (separate from the vault's pool: they are different layers)."""

    def __init__(self, url: str, *, pool_min: int = 0, pool_max: int = 4) -> None:
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        # Callers on the event loop run these calls on worker threads (off_loop), and every
        # wait is bounded: a database that stops answering costs a request a few seconds and
        # an error, never the replica.
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=pool_min,
            max_size=max(pool_min, pool_max, 1),
            timeout=WAIT_SECONDS,
            kwargs={
                "autocommit": True,
                "prepare_threshold": None,
                "row_factory": dict_row,
                "connect_timeout": int(WAIT_SECONDS),
                "options": f"-c statement_timeout={int(WAIT_SECONDS * 1000)}",
            },
            open=True,
            check=ConnectionPool.check_connection,
        )

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def connection(self) -> Iterator[Any]:
        with self._pool.connection() as conn:
            yield conn

    def database(self, schema: str, prefix: str = POSTGRES_PREFIX) -> PostgresDatabase:
        """A view of the pool whose tables (``schema``) exist once this returns."""
        with self.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            conn.execute(postgres_ddl(schema, prefix).encode())
        return PostgresDatabase(self, prefix)


class PostgresDatabase:
    remote = True

    def __init__(self, pool: PostgresPool, prefix: str, conn: Any = None) -> None:
        self._pool = pool
        self._prefix = prefix
        self._conn = conn  # inside atomic(): every statement on this connection

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        if self._conn is not None:
            yield self._conn
        else:
            with self._pool.connection() as conn:
                yield conn

    def one(self, sql: str, *args: Any) -> Row | None:
        with self._connection() as conn:
            row: Row | None = conn.execute(native(sql, self._prefix), args).fetchone()
            return row

    def all(self, sql: str, *args: Any) -> list[Row]:
        with self._connection() as conn:
            return list(conn.execute(native(sql, self._prefix), args).fetchall())

    def run(self, sql: str, *args: Any) -> int:
        with self._connection() as conn:
            return int(conn.execute(native(sql, self._prefix), args).rowcount)

    def lock(self, key: int) -> None:
        """Inside ``atomic()``: wait for every other holder of ``key`` (released at commit)."""
        self.one("SELECT pg_advisory_xact_lock(?)", key)

    @contextmanager
    def atomic(self) -> Iterator[PostgresDatabase]:
        with self._pool.connection() as conn, conn.transaction():
            yield PostgresDatabase(self._pool, self._prefix, conn)
