"""One migration runner for everything the server stores.

A component (the vault, the authorization server's state, the explorer's) keeps numbered
scripts per database in a package: ``sqlite/NNNN_what.sql`` and ``postgres/NNNN_what.sql``.
Each script is applied once, in order, in one transaction with the record of it:

- on SQLite, a component has a database file of its own, and its ``PRAGMA user_version``
  is the last version applied;
- on PostgreSQL, components share one database, and each records its versions in a table of
  its own (:attr:`Migrations.record`: ``schema_migrations`` for the vault, as it always has),
  under one advisory lock, so replicas starting together migrate once.

Never edit a script that has shipped: add the next one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import sqlite3

Dialect = Literal["sqlite", "postgres"]
# pg_advisory_lock key: any constant shared by every replica of this service.
_MIGRATION_LOCK = 0x4D454D524F555445  # "MEMROUTE"
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")


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
    given); return the version now."""
    import psycopg

    record = migrations.record  # a plain name (checked when made), as statements show it
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
        try:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {record} (version integer PRIMARY KEY, "
                "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            row = conn.execute(f"SELECT coalesce(max(version), 0) FROM {record}").fetchone()
            current = int(row[0]) if row else 0
            for script in migrations.scripts("postgres", until):
                if script.version <= current:
                    continue
                with conn.transaction():
                    conn.execute(script.text.encode())
                    conn.execute(
                        f"INSERT INTO {record} (version, name) VALUES (%s, %s)",
                        (script.version, script.name),
                    )
                current = script.version
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    return current
