"""Which key stored each memory: its public id (never the key) and the mode it was presented
in, recorded on every write path that makes memories from a key, on SQLite and PostgreSQL;
memories stored before writers were kept have none."""

from __future__ import annotations

import sqlite3
from importlib import resources
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
from mcp.client import Client
from psycopg import sql

from mcp_memoryrouter.auth.scopes import load_policy
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.mcp_server.binding import Binder
from mcp_memoryrouter.mcp_server.budget import ResultBudget
from mcp_memoryrouter.mcp_server.server import build_server
from mcp_memoryrouter.vault.store.postgres.schema import migrate
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests import pg
from tests.support import Vault
from tests.support.store import mint

Stored = dict[str, tuple[str | None, str | None]]


def owner_id(vault: Vault) -> str:
    """The public id of the vault's first key (``vault.key``)."""
    response = vault.http.get("/v1/keys", headers=vault.headers())
    assert response.status_code == 200, response.text
    (found,) = [k["id"] for k in response.json()["keys"] if k["name"] == "default"]
    return str(found)


def writers(vault: Vault) -> Stored:
    """Each memory's (key_id, key_mode), by its text."""
    rows = vault.sql("SELECT content, key_id, key_mode FROM memories")
    return {row[0]: (row[1], row[2]) for row in rows}


def test_ingest_records_the_key_id_and_the_mode_the_key_was_presented_in(vault: Vault) -> None:
    logger, other = mint(vault, "logger")
    vault.ingest("stored by the full key")
    vault.ingest("stored by the logger narrowed to write", key=logger + ":write")
    vault.ingest("stored by the logger in full", key=logger)
    owner = owner_id(vault)
    assert writers(vault) == {
        "stored by the full key": (owner, "full"),
        "stored by the logger narrowed to write": (other, "write"),
        "stored by the logger in full": (other, "full"),
    }
    dump = vault.dump()
    assert vault.key not in dump and logger not in dump  # the id, never the key


def test_a_duplicate_keeps_the_writer_that_stored_it_first(vault: Vault) -> None:
    logger, logger_id = mint(vault, "logger")
    vault.ingest("said once", key=logger + ":write")
    assert vault.ingest("said once")["duplicates"] == 1
    assert writers(vault) == {"said once": (logger_id, "write")}


def test_reflections_record_the_key_that_committed_or_imported_them(vault: Vault) -> None:
    curator, curator_id = mint(vault, "curator")
    vault.ingest("a raw memory to consolidate", date="2026-02-01T10:00:00Z")
    batch = vault.post("/v1/memory/consolidate/checkout", {"tier": 1}, curator).json()
    entries = [{"text": "A reflection the curator wrote.", "importance": 6}]
    committed = {"batch_id": batch["batch_id"], "entries": entries}
    assert vault.post("/v1/memory/consolidate/commit", committed, curator).status_code == 200
    source = vault.ingest("the source of an import", date="2026-02-03T10:00:00Z")["ids"][0]
    imported = {
        "tier": 2,
        "entries": [{"text": "An imported reflection.", "importance": 5}],
        "source_ids": [source],
    }
    response = vault.post("/v1/memory/import-reflections", imported)
    assert response.status_code == 200, response.text
    by_text = writers(vault)
    assert by_text["A reflection the curator wrote."] == (curator_id, "full")
    assert by_text["An imported reflection."] == (owner_id(vault), "full")


@pytest.mark.anyio
async def test_store_memory_over_mcp_records_the_key_the_tool_acts_with(vault: Vault) -> None:
    logger, logger_id = mint(vault, "logger")
    transport = httpx2.ASGITransport(app=vault.app)
    client = VaultClient("http://vault.internal", transport=transport)
    server = build_server(Binder(client, load_policy(), ResultBudget(10_000), logger + ":write"))
    try:
        async with Client(server) as mcp:
            stored = await mcp.call_tool("store_memory", {"content": "remembered over MCP"})
    finally:
        await client.aclose()
    assert stored.structured_content is not None and stored.structured_content["stored"] == 1
    assert writers(vault) == {"remembered over MCP": (logger_id, "write")}


# --- memories stored before writers were kept ----------------------------------------------

SQLITE_BEFORE = 5  # the last SQLite migration without writers
POSTGRES_BEFORE = 5


def test_sqlite_memories_stored_before_writers_were_kept_have_none(tmp_path: Path) -> None:
    path = tmp_path / "vault.sqlite3"
    folder = resources.files("mcp_memoryrouter.vault.migrations").joinpath("sqlite")
    conn = sqlite3.connect(path)
    try:
        for version in range(1, SQLITE_BEFORE + 1):
            (script,) = [p for p in folder.iterdir() if p.name.startswith(f"{version:04d}_")]
            conn.executescript(script.read_text(encoding="utf-8"))
        conn.execute(f"PRAGMA user_version = {SQLITE_BEFORE}")
        conn.execute("INSERT INTO vaults (id, ref, created_ms) VALUES ('a', 'vr_a', 0)")
        conn.execute(
            "INSERT INTO memories (id, vault_id, tier, content, tokens, date_from, date_to, "
            "created_ms) VALUES ('m1', 'a', 1, 'an old memory', 3, 0, 0, 0)"
        )
        conn.commit()
    finally:
        conn.close()
    store = SQLiteStore(path)
    try:
        assert store.schema_version > SQLITE_BEFORE
    finally:
        store.close()
    assert read(path, "SELECT id, key_id, key_mode FROM memories") == [("m1", None, None)]


def read(path: Path, statement: str) -> list[Any]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(statement).fetchall()
    finally:
        conn.close()


@pytest.mark.postgres
def test_postgres_memories_stored_before_writers_were_kept_have_none(
    postgres_databases: pg.Databases,
) -> None:
    name = "mr_writers_upgrade"
    admin = postgres_databases.admin_url
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = pg.with_database(admin, name)
    try:
        assert migrate(url, until=POSTGRES_BEFORE) == POSTGRES_BEFORE
        with psycopg.connect(url) as conn:
            conn.execute("INSERT INTO vaults (id, ref, created_ms) VALUES ('a', 'vr_a', 0)")
            conn.execute(
                "INSERT INTO memories (id, vault_id, tier, content, tokens, date_from, "
                "date_to, created_ms) VALUES ('m1', 'a', 1, 'an old memory', 3, 0, 0, 0)"
            )
        assert migrate(url) > POSTGRES_BEFORE
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT id, key_id, key_mode FROM memories").fetchall()
        assert rows == [("m1", None, None)]
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(drop)
