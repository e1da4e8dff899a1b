"""The authorization server's and the explorer's tables come from migrations run by the one
runner (``db/migrations.py``), and a deployment whose tables were made at start by an
earlier version (``CREATE TABLE IF NOT EXISTS``, no record of any migration) keeps its rows:
on SQLite the authorization server's tables take the ``oauth_`` prefix they have on
PostgreSQL; on PostgreSQL nothing of them changes and the migrations are recorded apart from
the vault's."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest
from cryptography.fernet import Fernet

from mcp_memoryrouter.auth.state.database import AUTH_MIGRATIONS, PostgresPool
from mcp_memoryrouter.auth.state.sealing import Sealer
from mcp_memoryrouter.auth.state.store import AUTH_DB_FILE, AuthStore
from mcp_memoryrouter.ui.sessions import UI_DB_FILE, UiSessions
from tests import pg

# As the authorization server made its tables at start before they had migrations ({p}: no
# prefix on SQLite, oauth_ on PostgreSQL), a subset: the rest is made by the first migration.
EARLIER_AUTH = """
CREATE TABLE IF NOT EXISTS {p}grants (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    vault_ref TEXT NOT NULL,
    sealed_key TEXT NOT NULL,
    scopes TEXT NOT NULL,
    resource TEXT NOT NULL,
    created_at {real} NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS {p}codes (
    digest TEXT PRIMARY KEY,
    grant_id TEXT NOT NULL REFERENCES {p}grants(id),
    redirect_uri TEXT NOT NULL,
    explicit INTEGER NOT NULL,
    code_challenge TEXT NOT NULL,
    expires_at {real} NOT NULL,
    used INTEGER NOT NULL DEFAULT 0
);
INSERT INTO {p}grants VALUES ('g1', 'app', 'vr_a', 'sealed', 'memories:read', 'r', 1.5, 0);
"""
EARLIER_UI = """
CREATE TABLE IF NOT EXISTS ui_corrections (
    vault_ref TEXT NOT NULL,
    corrected TEXT NOT NULL,
    correction TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (vault_ref, corrected, correction)
);
INSERT INTO ui_corrections VALUES ('vr_a', 'm1', 'm2', 1.5);
"""


def test_an_earlier_sqlite_state_keeps_its_rows(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / AUTH_DB_FILE) as conn:
        conn.executescript(EARLIER_AUTH.format(p="", real="REAL"))
    with sqlite3.connect(tmp_path / UI_DB_FILE) as conn:
        conn.executescript(EARLIER_UI)

    store = AuthStore.sqlite(tmp_path / AUTH_DB_FILE)
    try:
        grant = store.grant("g1")
        assert grant is not None and grant.scopes == ["memories:read"]
        store.save_code("c1", "g1", "https://app.example/cb", True, "challenge", 10.0)
        code = store.code("c1")
        assert code is not None and code.grant == grant
    finally:
        store.close()
    sessions = UiSessions.in_dir(tmp_path, Sealer.in_dir(tmp_path))
    try:
        assert sessions.corrections().corrected_by("vr_a", "m1") == ["m2"]
    finally:
        sessions.close()

    with sqlite3.connect(tmp_path / AUTH_DB_FILE) as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        assert "grants" not in tables and {"oauth_grants", "oauth_codes"} <= tables
        (codes,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'oauth_codes'")
        assert '"oauth_grants"' in codes[0]  # the reference follows the renamed table
        assert conn.execute("PRAGMA user_version").fetchone() == (2,)
    with sqlite3.connect(tmp_path / UI_DB_FILE) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (1,)

    again = AuthStore.sqlite(tmp_path / AUTH_DB_FILE)  # migrated once
    try:
        assert again.grant("g1") == grant
    finally:
        again.close()


@pytest.mark.postgres
def test_an_earlier_postgres_state_keeps_its_rows_and_records_apart(
    postgres_databases: pg.Databases,
) -> None:
    url = postgres_databases.create()  # the vault's schema, as a server shares it
    pool = PostgresPool(url)
    try:
        with psycopg.connect(url) as conn:
            conn.execute(EARLIER_AUTH.format(p="oauth_", real="DOUBLE PRECISION").encode())
            conn.execute(EARLIER_UI.replace(" REAL", " DOUBLE PRECISION").encode())
            vault_versions = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()
        store = AuthStore.postgres(pool)
        grant = store.grant("g1")
        assert grant is not None and grant.scopes == ["memories:read"]
        sessions = UiSessions.postgres(pool, Sealer(Fernet.generate_key()))
        assert sessions.corrections().corrected_by("vr_a", "m1") == ["m2"]
        with psycopg.connect(url) as conn:
            auth = conn.execute("SELECT version FROM oauth_schema_migrations").fetchall()
            ui = conn.execute("SELECT version FROM ui_schema_migrations").fetchall()
            assert auth == [(s.version,) for s in AUTH_MIGRATIONS.scripts("postgres")]
            assert ui == [(1,)]
            assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone() == (
                vault_versions
            )
            assert conn.execute("SELECT count(*) FROM oauth_signing_keys").fetchone() == (0,)
    finally:
        pool.close()
        postgres_databases.release(url)
