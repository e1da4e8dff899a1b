"""PostgreSQL: the dialect's ``Tx`` (``?`` placeholders run as psycopg's ``%s``, arrays for
membership, row locks where a change reads rows), the connection pools, and a database over
a pool for small state.

Statements are never prepared (``prepare_threshold=None``): a cached generic plan would pin
the vault's vector search to one path whatever the filter (``vault/store/postgres/vectors``),
and a pooler in transaction mode (PgBouncer before 1.21) cannot keep a prepared statement.

Everything here works through PgBouncer in transaction mode, as managed PostgreSQL is usually
fronted: no setting outlives its transaction (a statement's bound is ``SET LOCAL``, never a
startup option PgBouncer refuses), locks are transaction-scoped, server-side cursors live
inside the transaction that declares them, and nothing uses ``LISTEN``.

A database that goes away (a restart, a failover) is noticed by its :class:`Pool`: while it
is away a checkout waits :data:`AWAY_WAIT_SECONDS` at most, and the caller answers 503 with
``Retry-After``; the pool reconnects by itself when the database is back.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import errors
from psycopg_pool import ConnectionPool, PoolTimeout

from mcp_memoryrouter.db import Params, Record, Row, records_of
from mcp_memoryrouter.db.migrations import Migrations, migrate_postgres
from mcp_memoryrouter.errors import StoreUnavailable

Conn = psycopg.Connection[tuple[Any, ...]]
Error = psycopg.Error
TransactionRollback = errors.TransactionRollback
__all__ = [
    "Conn",
    "Error",
    "PgTx",
    "Pool",
    "PoolTimeout",
    "PostgresDatabase",
    "pool",
    "unavailable",
]
_cursor_names = itertools.count()
# While the database is away, the longest a checkout waits before the caller answers 503
AWAY_WAIT_SECONDS = 2.0
# What a 503 asks a client to wait before it tries again (Retry-After)
RETRY_AFTER_SECONDS = 2
# A pool that cannot connect gives up after this long, and the next checkout starts a new
# series of attempts at once: reconnection follows the database's return within seconds
# instead of after psycopg_pool's doubling waits (up to minutes).
_RECONNECT_SECONDS = 5.0


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

    def by_key(self, column: str) -> str:
        return column

    def for_update(self, of: str | None = None) -> str:
        return " FOR UPDATE" if of is None else f" FOR UPDATE OF {of}"

    def lock(self, key: int) -> None:
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))


class Pool(ConnectionPool[Conn]):
    """A connection pool that knows whether its database is away: since when a connection
    or a statement last failed for want of the database (``None``: it answers)."""

    away_since: float | None = None
    statement_ms: int | None = None  # every transaction's bound (``SET LOCAL``), if any

    def __init__(self, conninfo: str, **kwargs: Any) -> None:
        super().__init__(conninfo, check=self._checked, **kwargs)

    def _checked(self, conn: Conn) -> None:
        """psycopg_pool's check of a connection before it is lent, its failure recorded."""
        try:
            ConnectionPool.check_connection(conn)
        except Exception as exc:
            self.noticed(exc)
            raise

    def noticed(self, exc: BaseException) -> None:
        """Record a failure: the database is away if ``exc`` says it could not be reached
        (not a checkout that timed out: that is a busy pool, its database answering)."""
        if isinstance(exc, psycopg.OperationalError) and not isinstance(exc, errors.QueryCanceled):
            self.away_since = self.away_since or time.monotonic()

    def answered(self) -> None:
        self.away_since = None

    @contextmanager
    def checkout(self, timeout: float | None = None) -> Iterator[Conn]:
        """A connection, as ``connection()`` (committed when the block ends, rolled back
        when it raises), waited for up to ``timeout`` (the pool's) in turns of
        :data:`AWAY_WAIT_SECONDS`: a turn that ends while the database is away ends the
        wait, so a request answers 503 in seconds instead of queueing for the whole
        timeout. Failures and answers are recorded."""
        conn = self._waited(self.timeout if timeout is None else timeout)
        try:
            with conn:
                yield conn
        except BaseException as exc:
            self.noticed(exc)
            raise
        finally:
            self.putconn(conn)
        self.answered()

    def _waited(self, timeout: float) -> Conn:
        deadline = time.monotonic() + timeout
        while True:
            turn = min(AWAY_WAIT_SECONDS, deadline - time.monotonic())
            try:
                return self.getconn(timeout=max(turn, 0.001))
            except PoolTimeout:
                if self.away_since is not None or time.monotonic() >= deadline:
                    raise


@contextmanager
def direct(url: str) -> Iterator[Conn]:
    """A connection of its own in autocommit mode, outside every pool: for statements that
    cannot run in a transaction (``CREATE INDEX CONCURRENTLY``) and may take minutes."""
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
        yield conn


def unavailable(exc: BaseException) -> StoreUnavailable:
    """The 503 a caller answers when the database failed it: a message that says what to do,
    and the ``Retry-After`` to send."""
    if isinstance(exc, PoolTimeout):
        message = (
            "no database connection came free in time (the database is away, or busy); "
            f"try again in {RETRY_AFTER_SECONDS} s"
        )
    elif isinstance(exc, psycopg.OperationalError):
        message = (
            "the database cannot be reached right now (restarting or failing over?); "
            f"try again in {RETRY_AFTER_SECONDS} s"
        )
    else:
        message = f"the database refused the request ({type(exc).__name__}); try again"
    return StoreUnavailable(message, {"retry_after": RETRY_AFTER_SECONDS})


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
    ``bound_seconds``: when given, the longest connecting and each statement may take (a
    statement's bound is set by :class:`PostgresDatabase`, in each transaction);
    ``autocommit``: each statement outside ``conn.transaction()`` commits on its own (else
    a checkout is one transaction, committed when it is returned). A connection the server
    dropped (a restart, a failover) is replaced before use instead of failing a request."""
    kwargs: dict[str, Any] = {"autocommit": autocommit, "prepare_threshold": None}
    if bound_seconds is not None:
        kwargs["connect_timeout"] = max(1, int(bound_seconds))
    connections = Pool(
        url,
        min_size=min_size,
        max_size=max(min_size, max_size, 1),
        timeout=timeout,
        kwargs=kwargs,
        name=name,
        reconnect_timeout=_RECONNECT_SECONDS,
        open=False,
    )
    if bound_seconds is not None:
        connections.statement_ms = int(bound_seconds * 1000)
    connections.open()
    return connections


class PostgresDatabase:
    """Small state in the shared database, over an autocommit pool (:func:`pool`) that
    stays its owner's to close; ``migrations`` are applied before this returns. A database
    that cannot answer is a :class:`StoreUnavailable` (503, ``Retry-After``)."""

    remote = True

    def __init__(self, url: str, connections: Pool, migrations: Migrations) -> None:
        self._pool = connections
        try:
            self.version = migrate_postgres(url, migrations)
        except psycopg.Error as exc:
            raise unavailable(exc) from exc

    def close(self) -> None:
        """Nothing: the pool is its owner's."""

    @contextmanager
    def transaction(self) -> Iterator[PgTx]:
        try:
            with self._pool.checkout() as conn, conn.transaction():
                if self._pool.statement_ms is not None:
                    conn.execute(f"SET LOCAL statement_timeout = {self._pool.statement_ms}")
                yield PgTx(conn)
        except (psycopg.Error, PoolTimeout) as exc:
            raise unavailable(exc) from exc

    @contextmanager
    def statement(self) -> Iterator[PgTx]:
        """One statement that commits on its own; bounded, it runs in a transaction of its
        own, the only place a bound set through a pooler stays with its statement."""
        if self._pool.statement_ms is not None:
            with self.transaction() as tx:
                yield tx
            return
        try:
            with self._pool.checkout() as conn:
                yield PgTx(conn)
        except (psycopg.Error, PoolTimeout) as exc:
            raise unavailable(exc) from exc
