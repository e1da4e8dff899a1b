"""Keys: where they are read from, what their modes allow, minting, isolation."""

from __future__ import annotations

import pytest

from tests.support import Vault
from tests.support.api import assert_envelope

SEARCH = {"query": "postgres"}


def test_missing_key_is_401_in_the_envelope(vault: Vault) -> None:
    response = vault.http.post("/v1/memory/search", json=SEARCH)
    assert_envelope(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("bad", ["mk_unknownunknownunknownunknown", "garbage", "Bearer"])
def test_unknown_key_is_401(vault: Vault, bad: str) -> None:
    response = vault.http.post("/v1/memory/search", json=SEARCH, headers={"x-api-key": bad})
    assert_envelope(response, 401, "unauthorized")


@pytest.mark.parametrize("header", ["X-Memory-Key", "x-api-key"])
def test_key_is_accepted_from_each_header(vault: Vault, header: str) -> None:
    response = vault.http.post("/v1/memory/search", json=SEARCH, headers={header: vault.key})
    assert response.status_code == 200


def test_x_memory_key_wins_over_authorization_and_x_api_key(vault: Vault) -> None:
    other = vault.new_key()
    vault.ingest("postgres chosen", key=other)
    headers = {
        "X-Memory-Key": other,
        "Authorization": f"Bearer {vault.key}",
        "x-api-key": vault.key,
    }
    hits = vault.http.post("/v1/memory/search", json=SEARCH, headers=headers).json()["memories"]
    assert len(hits) == 1
    headers = {"Authorization": f"Bearer {other}", "x-api-key": vault.key}
    hits = vault.http.post("/v1/memory/search", json=SEARCH, headers=headers).json()["memories"]
    assert len(hits) == 1


def test_keys_are_stored_only_as_hashes(vault: Vault, tmp_path: object) -> None:
    dump = vault.dump()
    assert vault.key not in dump
    assert vault.key[3:] not in dump


def test_read_suffix_retrieves_but_never_stores(vault: Vault) -> None:
    read = vault.key + ":read"
    assert vault.post("/v1/memory/search", SEARCH, read).status_code == 200
    body = {"messages": [{"content": "x"}]}
    assert_envelope(vault.post("/v1/memory/ingest", body, read), 403, "forbidden")


def test_write_suffix_stores_but_never_retrieves(vault: Vault) -> None:
    write = vault.key + ":write"
    assert (
        vault.post("/v1/memory/ingest", {"messages": [{"content": "x"}]}, write).status_code == 202
    )
    assert_envelope(vault.post("/v1/memory/search", SEARCH, write), 403, "forbidden")
    assert_envelope(
        vault.post("/v1/memory/consolidate/checkout", {"tier": 1}, write), 403, "forbidden"
    )


def test_off_suffix_does_neither(vault: Vault) -> None:
    off = vault.key + ":off"
    assert_envelope(vault.post("/v1/memory/search", SEARCH, off), 403, "forbidden")
    assert_envelope(
        vault.post("/v1/memory/ingest", {"messages": [{"content": "x"}]}, off), 403, "forbidden"
    )


def test_minted_key_opens_the_same_vault(vault: Vault) -> None:
    vault.ingest("postgres is the database")
    response = vault.post("/v1/keys", {"name": "laptop"})
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"id", "key", "name", "read_only", "created_at"}
    assert body["key"].startswith("mk_") and len(body["key"]) >= 43
    assert (body["name"], body["read_only"]) == ("laptop", False)
    hits = vault.post("/v1/memory/search", SEARCH, body["key"]).json()["memories"]
    assert [h["content"] for h in hits] == ["postgres is the database"]


def test_minted_read_only_key_reads_but_gets_403_on_every_write(vault: Vault) -> None:
    ids = vault.ingest("postgres")["ids"]
    ro = vault.post("/v1/keys", {"read_only": True}).json()["key"]
    assert vault.post("/v1/memory/search", SEARCH, ro).status_code == 200
    assert vault.post("/v1/memory/inspect", {"memory_id": ids[0]}, ro).status_code == 200
    assert vault.http.get("/v1/memory/stats", headers=vault.headers(ro)).status_code == 200
    writes = [
        ("/v1/memory/ingest", {"messages": [{"content": "x"}]}),
        ("/v1/memory/consolidate/checkout", {"tier": 1}),
        (
            "/v1/memory/consolidate/commit",
            {"batch_id": "cb_x", "entries": [{"text": "t", "importance": 1}]},
        ),
        ("/v1/memory/delete-ids", {"ids": ids}),
        ("/v1/keys", {}),
    ]
    for path, body in writes:
        assert_envelope(vault.post(path, body, ro), 403, "forbidden")
    assert_envelope(vault.http.delete("/v1/memory", headers=vault.headers(ro)), 403, "forbidden")
    assert vault.post("/v1/memory/search", SEARCH).json()["memories"]  # nothing was deleted


def test_read_only_key_cannot_mint_keys_and_write_mode_cannot_either(vault: Vault) -> None:
    assert_envelope(vault.post("/v1/keys", {}, vault.key + ":write"), 403, "forbidden")


def test_ids_of_another_vault_behave_exactly_like_unknown_ids(vault: Vault) -> None:
    other = vault.new_key()
    foreign = vault.ingest("secret of the other vault", key=other)["ids"][0]
    unknown = "00000000-0000-4000-8000-000000000000"
    for memory_id in (foreign, unknown):
        response = vault.post("/v1/memory/inspect", {"memory_id": memory_id})
        assert_envelope(response, 404, "not_found")
    assert (
        vault.post("/v1/memory/inspect", {"memory_id": foreign}).json()["error"]["message"]
        == (vault.post("/v1/memory/inspect", {"memory_id": unknown}).json()["error"]["message"])
    )
    deleted = vault.post("/v1/memory/delete-ids", {"ids": [foreign]}).json()
    assert (deleted["deleted"], deleted["not_found"]) == (0, 1)
    assert vault.post("/v1/memory/search", {"query": "secret"}).json()["memories"] == []
    assert vault.post("/v1/memory/inspect", {"memory_id": foreign}, other).status_code == 200
