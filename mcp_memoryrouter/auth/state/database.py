"""Where the authorization server and the explorer keep their state, on the server's one
connection layer (:mod:`mcp_memoryrouter.db`): a SQLite file of their own in the data
directory (one process), or the shared PostgreSQL (any number of replicas).

Statements are the dialect's (``?`` placeholders, ``INSERT … ON CONFLICT … DO UPDATE`` for
upserts) and name their tables alike on both databases (``oauth_…``, ``ui_…``); rows come
back by column name. A one-time use (a code, a refresh token) is one ``UPDATE … WHERE used =
0`` whose row count decides, which is atomic on both: on PostgreSQL a concurrent second
update waits for the first's row lock and then finds the row used.

The tables are made and changed by migrations (``auth/state/migrations``,
``ui/migrations``), applied by the one runner when a database is opened. They are not the
vault's: the authorization server is a client of the vault and never touches its schema,
and the vault never reads these tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread

from mcp_memoryrouter import db
from mcp_memoryrouter.db.migrations import Migrations
from mcp_memoryrouter.db.sqlite import SqliteDatabase

if TYPE_CHECKING:
    from mcp_memoryrouter.db.postgres import Pool

Row = Mapping[str, Any]
T = TypeVar("T")

# The authorization server's tables (and, on PostgreSQL, the signing keys replicas share).
AUTH_MIGRATIONS = Migrations.of(
    "mcp_memoryrouter.auth.state.migrations", record="oauth_schema_migrations"
)
WAIT_SECONDS = 5.0  # the longest a connection, a checkout or a statement may take


async def off_loop(remote: bool, work: Callable[[], T]) -> T:
    """``work()``, on a worker thread when it waits on a remote database: an event loop that
    waits for PostgreSQL stalls every request of the replica, while a SQLite statement on a
    local file takes microseconds and is cheaper run in place than handed to a thread."""
    if not remote:
        return work()
    return await anyio.to_thread.run_sync(work)


class Database:
    """Statements with rows by column name: ``one``, ``all`` and ``run`` each commit on their
    own, ``atomic()`` runs several in one transaction."""

    def __init__(self, database: db.Database, tx: db.Tx | None = None) -> None:
        self._database = database
        self._tx = tx  # inside atomic(): every statement in this transaction

    @classmethod
    def sqlite(cls, path: Path, migrations: Migrations) -> Database:
        """A file of its own (0600), its migrations applied."""
        return cls(SqliteDatabase(path, migrations))

    @property
    def remote(self) -> bool:
        """Whether a statement waits on another machine: run it with :func:`off_loop`."""
        return self._database.remote

    def close(self) -> None:
        self._database.close()

    @contextmanager
    def _statement(self) -> Iterator[db.Tx]:
        if self._tx is not None:
            yield self._tx
        else:
            with self._database.statement() as tx:
                yield tx

    def one(self, sql: str, *args: Any) -> Row | None:
        rows = self.all(sql, *args)
        return rows[0] if rows else None

    def all(self, sql: str, *args: Any) -> list[Row]:
        with self._statement() as tx:
            return list(tx.records(sql, args))

    def run(self, sql: str, *args: Any) -> int:
        with self._statement() as tx:
            return tx.run(sql, args)

    def lock(self, key: int) -> None:
        """Inside ``atomic()``: wait for every other holder of ``key`` (released at commit;
        nothing to wait for on SQLite, whose transaction holds the only writer)."""
        with self._statement() as tx:
            tx.lock(key)

    @contextmanager
    def atomic(self) -> Iterator[Database]:
        with self._database.transaction() as tx:
            yield Database(self._database, tx)

    def schema_version(self, migrations: Migrations) -> int:
        """The last of ``migrations`` applied here (the file's ``user_version`` on SQLite,
        the component's record table on PostgreSQL)."""
        if self.remote:
            sql = f"SELECT coalesce(max(version), 0) AS version FROM {migrations.record}"
            row = self.one(sql)
            return int(row["version"]) if row else 0
        row = self.one("PRAGMA user_version")
        return int(row["user_version"]) if row else 0


class PostgresPool:
    """The state's connections to the shared database: a small pool of its own, built by the
    one connection layer (:func:`mcp_memoryrouter.db.postgres.pool`) as the vault's is, but
    kept apart from it. Its statements commit on their own and every wait is bounded
    (:data:`WAIT_SECONDS`): the token checks and sign-in run on the event loop's worker
    threads and must fail in seconds, never queue behind the vault's searches, exports and
    index builds (which run unbounded, one transaction per checkout) — nor does the state
    need the vault to be served in this process."""

    def __init__(self, url: str, *, pool_min: int = 0, pool_max: int = 4) -> None:
        from mcp_memoryrouter.db import postgres

        self.url = url
        self._pool: Pool = postgres.pool(
            url,
            name="memoryrouter-state",
            min_size=pool_min,
            max_size=pool_max,
            timeout=WAIT_SECONDS,
            autocommit=True,
            bound_seconds=WAIT_SECONDS,
        )

    def close(self) -> None:
        self._pool.close()

    def database(self, migrations: Migrations) -> Database:
        """A view of the pool whose tables (``migrations``) are up to date once this
        returns; the pool stays its owner's to close."""
        from mcp_memoryrouter.db.postgres import PostgresDatabase

        return Database(PostgresDatabase(self.url, self._pool, migrations))
