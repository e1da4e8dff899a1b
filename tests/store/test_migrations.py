"""One migration runner (``db/migrations.py``) for every component the server stores: the
vault's records stay as they were (SQLite's ``PRAGMA user_version``, PostgreSQL's
``schema_migrations``), so a vault migrated by an earlier version (6) upgrades in place, and
another component's migrations in the same PostgreSQL database are recorded apart."""

from __future__ import annotations

import sqlite3
from importlib import resources
from pathlib import Path

import psycopg
import pytest

from mcp_memoryrouter.db.migrations import Migrations, migrate_postgres, migrate_sqlite
from mcp_memoryrouter.db.sqlite import SqliteDatabase, connect
from mcp_memoryrouter.vault.store.sql import MIGRATIONS
from tests import pg

SHIPPED = 6  # the vault's last migration when the one runner came
LATEST = MIGRATIONS.scripts("sqlite")[-1].version  # the vault's last migration now
NEXT = "CREATE TABLE upgraded (id integer PRIMARY KEY);\n"


def vault_and_one_more(tmp_path: Path) -> Migrations:
    """The vault's migrations as shipped, and one more."""
    folder = tmp_path / "migrations"
    for dialect in ("sqlite", "postgres"):
        source = resources.files("mcp_memoryrouter.vault.migrations").joinpath(dialect)
        (folder / dialect).mkdir(parents=True)
        for script in source.iterdir():
            if script.name.endswith(".sql"):
                (folder / dialect / script.name).write_text(script.read_text(encoding="utf-8"))
        (folder / dialect / f"{LATEST + 1:04d}_upgraded.sql").write_text(NEXT)
    return Migrations(folder, record="schema_migrations")


def component(tmp_path: Path, name: str, record: str) -> Migrations:
    folder = tmp_path / name
    for dialect in ("sqlite", "postgres"):
        (folder / dialect).mkdir(parents=True)
        (folder / dialect / "0001_init.sql").write_text(
            f"CREATE TABLE IF NOT EXISTS {name}_things (id integer PRIMARY KEY);\n"
        )
    return Migrations(folder, record=record)


def test_the_vault_has_its_shipped_migrations() -> None:
    assert [s.version for s in MIGRATIONS.scripts("sqlite")][:SHIPPED] == list(range(1, 7))
    assert [s.version for s in MIGRATIONS.scripts("postgres")][:SHIPPED] == list(range(1, 7))


def test_a_sqlite_vault_at_version_6_upgrades_in_place(tmp_path: Path) -> None:
    path = tmp_path / "vault.sqlite3"
    conn = sqlite3.connect(path)  # as an earlier version left it: its scripts, its record
    for script in MIGRATIONS.scripts("sqlite", until=SHIPPED):
        conn.executescript(script.text)
    conn.execute(f"PRAGMA user_version = {SHIPPED}")
    conn.execute("INSERT INTO vaults (id, ref, created_ms) VALUES ('a', 'vr_a', 0)")
    conn.commit()
    conn.close()

    conn = connect(path)
    try:
        assert migrate_sqlite(conn, vault_and_one_more(tmp_path)) == LATEST + 1
        assert migrate_sqlite(conn, vault_and_one_more(tmp_path / "again")) == LATEST + 1
        assert conn.execute("SELECT id FROM vaults").fetchall() == [("a",)]
        assert conn.execute("SELECT count(*) FROM upgraded").fetchone() == (0,)
        assert conn.execute("PRAGMA user_version").fetchone() == (LATEST + 1,)
    finally:
        conn.close()


def test_a_state_file_records_its_own_version(tmp_path: Path) -> None:
    migrations = component(tmp_path, "state", record="state_schema_migrations")
    db = SqliteDatabase(tmp_path / "data" / "state.sqlite3", migrations)
    try:
        assert db.version == 1
        with db.transaction() as tx:
            tx.run("INSERT INTO state_things (id) VALUES (?)", (1,))
        with db.statement() as tx:
            assert tx.records("SELECT id FROM state_things") == [{"id": 1}]
    finally:
        db.close()
    assert (tmp_path / "data" / "state.sqlite3").stat().st_mode & 0o777 == 0o600


def test_two_scripts_with_one_version_are_refused(tmp_path: Path) -> None:
    migrations = component(tmp_path, "twice", record="twice_schema_migrations")
    (tmp_path / "twice" / "sqlite" / "0001_again.sql").write_text("SELECT 1;\n")
    with pytest.raises(ValueError, match="share a version"):
        migrations.scripts("sqlite")
    with pytest.raises(ValueError, match="not a table name"):
        Migrations(tmp_path, record="schema_migrations; DROP TABLE memories")


@pytest.mark.postgres
def test_a_postgres_vault_at_version_6_upgrades_and_components_record_apart(
    postgres_databases: pg.Databases, tmp_path: Path
) -> None:
    url = postgres_databases.create()  # migrated by the vault's scripts, as shipped
    try:
        with psycopg.connect(url) as conn:
            conn.execute("DELETE FROM schema_migrations WHERE version > %s", (SHIPPED,))
            conn.execute("INSERT INTO vaults (id, ref, created_ms) VALUES ('a', 'vr_a', 0)")
        state = component(tmp_path, "state", record="state_schema_migrations")
        assert migrate_postgres(url, state) == 1
        assert migrate_postgres(url, vault_and_one_more(tmp_path)) == LATEST + 1
        assert migrate_postgres(url, vault_and_one_more(tmp_path / "again")) == LATEST + 1
        assert migrate_postgres(url, state) == 1
        with psycopg.connect(url) as conn:
            vault = conn.execute("SELECT version, name FROM schema_migrations ORDER BY 1")
            assert [v for v, _ in vault.fetchall()] == list(range(1, LATEST + 2))
            states = conn.execute("SELECT version, name FROM state_schema_migrations")
            assert states.fetchall() == [(1, "0001_init.sql")]
            assert conn.execute("SELECT id FROM vaults").fetchall() == [("a",)]
            assert conn.execute("SELECT count(*) FROM upgraded").fetchone() == (0,)
            conn.execute("DROP TABLE upgraded, state_things, state_schema_migrations")
            conn.execute("DELETE FROM schema_migrations WHERE version = %s", (LATEST + 1,))
    finally:
        postgres_databases.release(url)
