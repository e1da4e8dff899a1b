"""Where each memory came from (``stored_by``): the key (id and name), the surface the write
came through and the client it named, recorded on every write and shown on search, date
search and inspect rows and in the export, on SQLite and PostgreSQL. A surface outside the
closed list, or a client name no one could show, is refused before anything is written;
memories stored before it was kept have none."""

from __future__ import annotations

import json
import sqlite3
from importlib import resources
from pathlib import Path
from typing import Any

import httpx2
import pytest

from mcp_memoryrouter import schemas
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.transfer.archive import read_archive
from mcp_memoryrouter.transfer.importer import import_archive
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support import Vault
from tests.support.store import mint

SURFACE, CLIENT = schemas.SURFACE_HEADER, schemas.CLIENT_HEADER


def stored(vault: Vault, text: str, key: str | None = None, **headers: str) -> str:
    """Ingest ``text`` with ``headers``: its id."""
    body = {"messages": [{"content": text, "date": "2026-02-01T10:00:00Z"}]}
    response = vault.http.post(
        "/v1/memory/ingest", json=body, headers={**vault.headers(key), **headers}
    )
    assert response.status_code == 202, response.text
    return str(response.json()["ids"][0])


def inspected(vault: Vault, memory_id: str) -> dict[str, Any]:
    response = vault.post("/v1/memory/inspect", {"memory_id": memory_id})
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def owner(vault: Vault) -> dict[str, str]:
    keys = vault.http.get("/v1/keys", headers=vault.headers()).json()["keys"]
    (first,) = [k for k in keys if k["name"] == "default"]
    return {"key_id": first["id"], "key_name": first["name"]}


def test_a_rest_write_records_the_rest_surface_and_the_key_by_id_and_name(vault: Vault) -> None:
    logger, logger_id = mint(vault, "kitchen tablet")
    memory = stored(vault, "The oven timer is set for forty minutes.", logger)
    expected = {"surface": "rest", "key_id": logger_id, "key_name": "kitchen tablet"}
    assert inspected(vault, memory)["stored_by"] == expected
    found = vault.post("/v1/memory/search", {"query": "oven timer"}).json()["memories"]
    assert [row["stored_by"] for row in found if row["id"] == memory] == [expected]
    window = vault.post(
        "/v1/memory/date-search", {"from": "2026-02-01", "to": "2026-02-02"}
    ).json()["memories"]
    assert [row["stored_by"] for row in window if row["id"] == memory] == [expected]
    dump = vault.dump()
    assert logger not in dump  # the key's id and name, never the key


def test_the_surface_and_client_a_caller_names_are_recorded(vault: Vault) -> None:
    memory = stored(vault, "Synced from the phone.", **{SURFACE: "proxy", CLIENT: "Caf%C3%A9 app"})
    assert inspected(vault, memory)["stored_by"] == {
        "surface": "proxy",
        "client": "Café app",
        **owner(vault),
    }


@pytest.mark.parametrize("surface", ["telepathy", "REST", "rest ", ""])
def test_an_unknown_surface_is_refused_and_nothing_is_written(vault: Vault, surface: str) -> None:
    body = {"messages": [{"content": "should not be stored"}]}
    response = vault.http.post(
        "/v1/memory/ingest", json=body, headers={**vault.headers(), SURFACE: surface}
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["details"]["field"] == SURFACE
    assert vault.sql("SELECT count(*) FROM memories") == [(0,)]


@pytest.mark.parametrize(
    ("sent", "kept"),
    [("bell%07 desk\t", "bell desk"), ("x" * 120, "x" * 100), ("%0A%0D", None)],
)
def test_a_client_name_is_kept_printable_and_short(
    vault: Vault, sent: str, kept: str | None
) -> None:
    memory = stored(vault, "Named by its client.", **{CLIENT: sent})
    assert inspected(vault, memory)["stored_by"].get("client") == kept


def test_a_committed_reflection_records_the_consolidator_that_committed_it(vault: Vault) -> None:
    vault.ingest("A raw moment to consolidate.")
    loop = {**vault.headers(), SURFACE: "consolidator", CLIENT: "nightly job"}
    batch = vault.http.post(
        "/v1/memory/consolidate/checkout", json={"tier": 1}, headers=loop
    ).json()
    entries = [{"text": "A reflection the loop wrote.", "importance": 6}]
    committed = vault.http.post(
        "/v1/memory/consolidate/commit",
        json={"batch_id": batch["batch_id"], "entries": entries},
        headers=loop,
    )
    assert committed.status_code == 200, committed.text
    (reflection,) = committed.json()["created"]
    shown = inspected(vault, reflection["id"])
    assert shown["stored_by"] == {
        "surface": "consolidator",
        "client": "nightly job",
        **owner(vault),
    }
    (source,) = shown["sources"]
    assert source["stored_by"]["surface"] == "rest"


@pytest.mark.anyio
async def test_the_export_carries_stored_by_and_an_import_records_itself(
    vault: Vault, tmp_path: Path
) -> None:
    first = stored(vault, "Exported with its origin.", **{SURFACE: "mcp", CLIENT: "Claude"})
    lines = [
        json.loads(line)
        for line in vault.http.get("/v1/memory/export", headers=vault.headers()).text.splitlines()
    ]
    (line,) = [x for x in lines if x["id"] == first]
    assert line["stored_by"] == {"surface": "mcp", "client": "Claude", **owner(vault)}
    archive_path = tmp_path / "vault.jsonl"
    archive_path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    other_key = vault.new_key()
    client = VaultClient(
        "http://vault.internal", other_key, transport=httpx2.ASGITransport(app=vault.app)
    )
    try:
        await import_archive(
            client, read_archive(archive_path.read_text(encoding="utf-8").splitlines())
        )
    finally:
        await client.aclose()
    rows = vault.post("/v1/memory/search", {"query": "exported origin"}, other_key).json()[
        "memories"
    ]
    (imported,) = rows
    assert imported["stored_by"]["surface"] == "import"
    assert imported["stored_by"]["key_id"] != owner(vault)["key_id"]


def test_memories_stored_before_migration_8_have_no_stored_by(tmp_path: Path) -> None:
    path = tmp_path / "vault.sqlite3"
    folder = resources.files("mcp_memoryrouter.vault.migrations").joinpath("sqlite")
    conn = sqlite3.connect(path)
    try:
        for version in range(1, 8):
            (script,) = [p for p in folder.iterdir() if p.name.startswith(f"{version:04d}_")]
            conn.executescript(script.read_text(encoding="utf-8"))
        conn.execute("PRAGMA user_version = 7")
        conn.execute("INSERT INTO vaults (id, ref, created_ms) VALUES ('a', 'vr_a', 0)")
        conn.execute(
            "INSERT INTO memories (id, vault_id, tier, content, tokens, date_from, date_to, "
            "created_ms, key_id, key_mode) VALUES ('m', 'a', 1, 'old', 1, 0, 0, 0, 'k', 'full')"
        )
        conn.commit()
    finally:
        conn.close()
    store = SQLiteStore(path)
    try:
        assert store.schema_version >= 8
        assert store.writers_of("a", ["m"])["m"] is not None  # its key, from migration 6
        (row,) = store.export_rows("a", 10)
        assert row.memory.stored_by is not None and row.memory.stored_by.surface is None
    finally:
        store.close()
