"""Managing keys over REST: list, revoke, last used; unknown fields refused on creation."""

from __future__ import annotations

import sqlite3
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support import Vault
from tests.support.api import assert_envelope

SEARCH = {"query": "postgres"}


def listed(vault: Vault, key: str | None = None) -> list[dict[str, Any]]:
    response = vault.http.get("/v1/keys", headers=vault.headers(key))
    assert response.status_code == 200, response.text
    keys: list[dict[str, Any]] = response.json()["keys"]
    return keys


def mint(vault: Vault, **body: Any) -> dict[str, Any]:
    response = vault.post("/v1/keys", body)
    assert response.status_code == 201, response.text
    minted: dict[str, Any] = response.json()
    return minted


def test_listing_shows_every_key_of_the_vault_by_id_and_prefix_never_the_secret(
    vault: Vault,
) -> None:
    vault.clock.advance(1)
    laptop = mint(vault, name="laptop")
    vault.clock.advance(1)
    reader = mint(vault, name="reader", read_only=True)
    vault.new_key()  # another vault's key is not listed
    response = vault.http.get("/v1/keys", headers=vault.headers())
    body = response.json()
    assert (
        body["vault"] == vault.http.get("/v1/keys/current", headers=vault.headers()).json()["vault"]
    )
    keys = body["keys"]
    assert [k["name"] for k in keys] == ["default", "laptop", "reader"]
    assert set(keys[0]) == {"id", "name", "prefix", "read_only", "created_at", "last_used_at"}
    assert [k["id"] for k in keys[1:]] == [laptop["id"], reader["id"]]
    assert [k["read_only"] for k in keys] == [False, False, True]
    assert [k["prefix"] for k in keys] == [vault.key[:8], laptop["key"][:8], reader["key"][:8]]
    assert all(k["id"].startswith("key_") for k in keys)
    assert keys[0]["last_used_at"] == "2026-01-01T00:00:01.000Z"  # its first request
    assert keys[2]["last_used_at"] is None
    for secret in (vault.key, laptop["key"], reader["key"]):
        assert secret not in response.text and secret[8:] not in response.text


def test_a_revoked_key_is_401_on_its_next_request(vault: Vault) -> None:
    other = mint(vault, name="phone")
    assert vault.post("/v1/memory/search", SEARCH, other["key"]).status_code == 200
    response = vault.http.delete(f"/v1/keys/{other['id']}", headers=vault.headers())
    assert response.status_code == 200, response.text
    assert response.json() == {"id": other["id"], "revoked": True}
    assert_envelope(vault.post("/v1/memory/search", SEARCH, other["key"]), 401, "unauthorized")
    assert_envelope(
        vault.post("/v1/memory/search", SEARCH, other["key"] + ":read"), 401, "unauthorized"
    )
    assert [k["name"] for k in listed(vault)] == ["default"]


def test_a_key_may_revoke_itself_while_another_read_write_key_remains(vault: Vault) -> None:
    spare = mint(vault, name="spare")
    (own,) = [k for k in listed(vault) if k["name"] == "default"]
    assert vault.http.delete(f"/v1/keys/{own['id']}", headers=vault.headers()).status_code == 200
    assert_envelope(vault.post("/v1/memory/search", SEARCH), 401, "unauthorized")
    assert [k["name"] for k in listed(vault, spare["key"])] == ["spare"]


def test_revoking_the_last_read_write_key_is_409_and_keeps_it(vault: Vault) -> None:
    mint(vault, name="reader", read_only=True)  # a read-only key cannot mint or revoke
    (own,) = [k for k in listed(vault) if not k["read_only"]]
    response = vault.http.delete(f"/v1/keys/{own['id']}", headers=vault.headers())
    assert_envelope(response, 409, "conflict")
    assert response.json()["error"]["details"] == {"key_id": own["id"]}
    assert vault.post("/v1/memory/search", SEARCH).status_code == 200


def test_a_key_of_another_vault_is_answered_like_an_unknown_id(vault: Vault) -> None:
    other = vault.new_key()
    (foreign,) = listed(vault, other)
    for key_id in (foreign["id"], "key_0000000000000000"):
        response = vault.http.delete(f"/v1/keys/{key_id}", headers=vault.headers())
        assert_envelope(response, 404, "not_found")
    assert vault.post("/v1/memory/search", SEARCH, other).status_code == 200


def test_read_only_and_narrowed_keys_can_neither_list_nor_revoke(vault: Vault) -> None:
    reader = mint(vault, read_only=True)
    (own,) = [k for k in listed(vault) if not k["read_only"]]
    for key in (reader["key"], vault.key + ":read", vault.key + ":write"):
        assert_envelope(vault.http.get("/v1/keys", headers=vault.headers(key)), 403, "forbidden")
        response = vault.http.delete(f"/v1/keys/{reader['id']}", headers=vault.headers(key))
        assert_envelope(response, 403, "forbidden")
    assert len(listed(vault)) == 2 and own["id"]


def test_last_used_moves_at_most_once_a_minute(vault: Vault) -> None:
    phone = mint(vault, name="phone")

    def last_used() -> str | None:
        (row,) = [k for k in listed(vault) if k["id"] == phone["id"]]
        value: str | None = row["last_used_at"]
        return value

    assert last_used() is None
    vault.post("/v1/memory/search", SEARCH, phone["key"])
    assert last_used() == "2026-01-01T00:00:00.000Z"
    vault.clock.advance(59)
    vault.post("/v1/memory/search", SEARCH, phone["key"])
    assert last_used() == "2026-01-01T00:00:00.000Z"  # not written again within the minute
    vault.clock.advance(1)
    vault.post("/v1/memory/search", SEARCH, phone["key"] + ":read")
    assert last_used() == "2026-01-01T00:01:00.000Z"


def test_unknown_fields_in_key_creation_are_400_naming_them_and_mint_nothing(
    vault: Vault,
) -> None:
    for body, named in [({"mode": "read"}, "mode"), ({"name": "x", "readonly": True}, "readonly")]:
        response = vault.post("/v1/keys", body)
        assert_envelope(response, 400, "invalid_request")
        assert named in response.json()["error"]["message"]
    assert len(listed(vault)) == 1


def test_keys_made_before_key_management_get_an_id_and_no_prefix(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    folder = resources.files("mcp_memoryrouter.vault.migrations").joinpath("sqlite")
    for name in ("0001_init.sql", "0002_date_search.sql", "0003_retrieval.sql"):
        conn.executescript(folder.joinpath(name).read_text(encoding="utf-8"))
    conn.execute("PRAGMA user_version = 3")
    conn.execute("INSERT INTO vaults (id, ref, created_ms) VALUES ('v', 'vr_old', 5)")
    conn.execute(
        "INSERT INTO keys (hash, vault_id, name, read_only, created_ms) "
        "VALUES ('h1', 'v', 'one', 0, 5), ('h2', 'v', 'two', 1, 6)"
    )
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    try:
        keys = store.list_keys("v")
        assert [(k.name, k.prefix, k.last_used_ms) for k in keys] == [
            ("one", None, None),
            ("two", None, None),
        ]
        assert len({k.id for k in keys}) == 2 and all(k.id.startswith("key_") for k in keys)
        assert store.revoke_key("v", keys[0].id) and store.find_key("h1") is None
    finally:
        store.close()


@pytest.mark.parametrize(
    "name",
    [
        "\x1b[2J\x1b[Hall clear",
        "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07",  # OSC 52: writes the clipboard
        "a\x9b31mb",  # C1 CSI
        "del\x7f",
        "nul\x00",
        "\u202eevil",  # right-to-left override
        "\u2067isolated\u2069",
        "two\u2029paragraphs",
        "zero\u200bwidth",
    ],
)
def test_a_key_name_with_control_characters_is_400_naming_the_field_and_mints_nothing(
    vault: Vault, name: str
) -> None:
    response = vault.post("/v1/keys", {"name": name})
    assert_envelope(response, 400, "invalid_request")
    assert [e["field"] for e in response.json()["error"]["details"]["errors"]] == ["name"]
    assert len(listed(vault)) == 1


def test_key_names_in_any_script_keep_their_joiners(vault: Vault) -> None:
    names = [
        "Café ☕",
        "👩\u200d💻 laptop",
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
        "日本語のキー",
    ]
    for name in names:
        vault.clock.advance(1)  # listed oldest first
        mint(vault, name=name)
    assert [k["name"] for k in listed(vault)] == ["default", *names]
