"""One migration runner for everything the server stores.

A component (the vault, the authorization server's state, the explorer's) keeps numbered
scripts per database in a package: ``sqlite/NNNN_what.sql`` and ``postgres/NNNN_what.sql``.
Each script is applied once, in order, in one transaction with the record of it:

- on SQLite, a component has a database file of its own, and its ``PRAGMA user_version``
  is the last version applied;
- on PostgreSQL, components share one database, and each records its versions in a table of
  its own (:attr:`Migrations.record`: ``schema_migrations`` for the vault, as it always has),
  each script under one transaction-scoped advisory lock, so replicas starting together
  migrate once, through PgBouncer in transaction mode too (a session's lock would be taken
  on one server connection and released on another).

Never edit a script that has shipped: add the next one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, Literal

from mcp_memoryrouter.errors import ConfigError

if TYPE_CHECKING:
    import sqlite3

Dialect = Literal["sqlite", "postgres"]
# pg_advisory_xact_lock key: any constant shared by every replica of this service.
_MIGRATION_LOCK = 0x4D454D524F555445  # "MEMROUTE"
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")
# What PgBouncer answers a transaction in statement pooling mode: every use case here is a
# transaction of several statements, so the server refuses to start there.
_STATEMENT_POOLING = "statement pooling mode"


@dataclass(frozen=True)
class Script:
    version: int
    name: str
    text: str


@dataclass(frozen=True)
class Migrations:
    """A component's scripts (``folder/sqlite``, ``folder/postgres``), and the PostgreSQL
    table its applied versions are recorded in."""

    folder: Traversable
    record: str

    def __post_init__(self) -> None:
        if not _IDENTIFIER.fullmatch(self.record):
            raise ValueError(f"not a table name: {self.record!r}")

    @classmethod
    def of(cls, package: str, record: str) -> Migrations:
        return cls(resources.files(package), record)

    def scripts(self, dialect: Dialect, until: int | None = None) -> list[Script]:
        """The scripts in version order (up to ``until`` when given)."""
        folder = self.folder.joinpath(dialect)
        found = []
        for path in folder.iterdir():
            if path.name.endswith(".sql"):
                version = int(path.name.split("_", 1)[0])
                if until is None or version <= until:
                    found.append(Script(version, path.name, path.read_text(encoding="utf-8")))
        found.sort(key=lambda s: s.version)
        versions = [s.version for s in found]
        if len(set(versions)) != len(versions):
            raise ValueError(f"two {dialect} migrations share a version: {versions}")
        return found


def migrate_sqlite(
    conn: sqlite3.Connection, migrations: Migrations, until: int | None = None
) -> int:
    """Apply every script newer than ``PRAGMA user_version`` (up to ``until`` when given:
    an upgrade test's older schema); return the version now."""
    (current,) = conn.execute("PRAGMA user_version").fetchone()
    for script in migrations.scripts("sqlite", until):
        if script.version <= current:
            continue
        conn.executescript(
            "BEGIN IMMEDIATE;\n"
            + script.text
            + f"\nPRAGMA user_version = {script.version};\nCOMMIT;"
        )
        current = script.version
    return int(current)


def migrate_postgres(url: str, migrations: Migrations, until: int | None = None) -> int:
    """Apply every script newer than the last version recorded (up to ``until`` when
    given); return the version now. Through PgBouncer in statement pooling mode, a
    :class:`ConfigError` that says which mode to set."""
    import psycopg

    try:
        return _migrate_postgres(url, migrations, until)
    except psycopg.Error as exc:
        if _STATEMENT_POOLING in str(exc):
            raise ConfigError(
                "MEMORYROUTER_DATABASE_URL reaches a PgBouncer in statement pooling mode, "
                "where no transaction of several statements can run: set pool_mode = "
                "transaction (or session) for this database in pgbouncer.ini"
            ) from exc
        raise


def _migrate_postgres(url: str, migrations: Migrations, until: int | None) -> int:
    import psycopg

    record = migrations.record  # a plain name (checked when made), as statements show it
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
        # every step one transaction that first waits for the lock, and reads the version
        # again under it: another replica may have applied the script meanwhile
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {record} (version integer PRIMARY KEY, "
                "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
        current = 0
        for script in migrations.scripts("postgres", until):
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                row = conn.execute(f"SELECT coalesce(max(version), 0) FROM {record}").fetchone()
                current = int(row[0]) if row else 0
                if script.version <= current:
                    continue
                conn.execute(script.text.encode())
                conn.execute(
                    f"INSERT INTO {record} (version, name) VALUES (%s, %s)",
                    (script.version, script.name),
                )
                current = script.version
        if current == 0:  # no script to read the version by
            row = conn.execute(f"SELECT coalesce(max(version), 0) FROM {record}").fetchone()
            current = int(row[0]) if row else 0
    return current
