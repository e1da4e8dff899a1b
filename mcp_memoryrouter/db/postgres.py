"""PostgreSQL: the dialect's ``Tx`` (``?`` placeholders run as psycopg's ``%s``, arrays for
membership, row locks where a change reads rows), the connection pools, and a database over
a pool for small state.

Statements are never prepared (``prepare_threshold=None``): a cached generic plan would pin
the vault's vector search to one path whatever the filter (``vault/store/postgres/vectors``).
"""

from __future__ import annotations

import itertools
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import errors
from psycopg_pool import ConnectionPool, PoolTimeout

from mcp_memoryrouter.db import Params, Record, Row, records_of
from mcp_memoryrouter.db.migrations import Migrations, migrate_postgres

Conn = psycopg.Connection[tuple[Any, ...]]
Pool = ConnectionPool[Conn]
Error = psycopg.Error
TransactionRollback = errors.TransactionRollback
__all__ = ["Conn", "Error", "PgTx", "Pool", "PoolTimeout", "PostgresDatabase", "pool"]
_cursor_names = itertools.count()


@lru_cache(maxsize=512)
def native(sql: str) -> str:
    """A statement written with ``?`` placeholders in psycopg's style: ``%s`` (and a
    literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgTx:
    """A transaction on one pooled connection."""

    bytewise = ' COLLATE "C"'  # text orders by the database's locale unless told otherwise
    skip_locked = " FOR UPDATE SKIP LOCKED"
    join_in_order = "JOIN"

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def one(self, sql: str, params: Params = ()) -> Row | None:
        return self.conn.execute(native(sql), params).fetchone()

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        return self.conn.execute(native(sql), params).fetchall()

    def records(self, sql: str, params: Params = ()) -> list[Record]:
        cursor = self.conn.execute(native(sql), params)
        return records_of(cursor.description, cursor.fetchall())

    def run(self, sql: str, params: Params = ()) -> int:
        return self.conn.execute(native(sql), params).rowcount

    def many(self, sql: str, rows: Sequence[Params]) -> None:
        if rows:
            with self.conn.cursor() as cursor:
                cursor.executemany(native(sql), rows)

    def stream(self, sql: str, params: Params, fetch: int) -> Generator[Row]:
        # A server-side cursor: rows arrive ``fetch`` at a time, and a query that locks
        # rows locks only those read so far.
        name = f"stream_{next(_cursor_names)}"
        with self.conn.cursor(name=name, scrollable=False) as cursor:
            cursor.itersize = fetch
            cursor.execute(native(sql), params)
            yield from cursor

    def among(self, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return "= ANY(?)", [list(values)]

    def for_update(self, of: str | None = None) -> str:
        return " FOR UPDATE" if of is None else f" FOR UPDATE OF {of}"

    def lock(self, key: int) -> None:
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))


def pool(
    url: str,
    *,
    name: str,
    min_size: int,
    max_size: int,
    timeout: float,
    autocommit: bool = False,
    bound_seconds: float | None = None,
) -> Pool:
    """An open pool to ``url``. ``timeout``: the longest a checkout waits;
    ``bound_seconds``: when given, the longest connecting and each statement may take;
    ``autocommit``: each statement outside ``conn.transaction()`` commits on its own (else
    a checkout is one transaction, committed when it is returned). A connection the server
    dropped (a restart, a failover) is replaced before use instead of failing a request."""
    kwargs: dict[str, Any] = {"autocommit": autocommit, "prepare_threshold": None}
    if bound_seconds is not None:
        kwargs["connect_timeout"] = max(1, int(bound_seconds))
        kwargs["options"] = f"-c statement_timeout={int(bound_seconds * 1000)}"
    return ConnectionPool(
        url,
        min_size=min_size,
        max_size=max(min_size, max_size, 1),
        timeout=timeout,
        kwargs=kwargs,
        check=ConnectionPool.check_connection,
        name=name,
        open=True,
    )


class PostgresDatabase:
    """Small state in the shared database, over an autocommit pool (:func:`pool`) that
    stays its owner's to close; ``migrations`` are applied before this returns."""

    remote = True

    def __init__(self, url: str, connections: Pool, migrations: Migrations) -> None:
        self._pool = connections
        self.version = migrate_postgres(url, migrations)

    def close(self) -> None:
        """Nothing: the pool is its owner's."""

    @contextmanager
    def transaction(self) -> Iterator[PgTx]:
        with self._pool.connection() as conn, conn.transaction():
            yield PgTx(conn)

    @contextmanager
    def statement(self) -> Iterator[PgTx]:
        with self._pool.connection() as conn:
            yield PgTx(conn)
