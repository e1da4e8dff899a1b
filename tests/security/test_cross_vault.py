"""Another vault's ids, through every REST route that takes one: answered exactly like
unknown ids (same status, same envelope), and nothing of the other vault shows or changes."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

from mcp_memoryrouter.vault.rules.domain import new_batch_id
from tests.support import Vault
from tests.support.vaults import ENTRY, Owned


def normalised(response: httpx2.Response, sent: str) -> tuple[int, str]:
    """Status and body with the id the caller sent blanked out (details may echo it)."""
    return response.status_code, response.text.replace(sent, "<sent>")


Body = Callable[[str], dict[str, Any]]


def assert_like_unknown(
    vault: Vault, key: str, path: str, build: Body, theirs: str, unknown: str
) -> httpx2.Response:
    mine: httpx2.Response = vault.post(path, build(theirs), key)
    never: httpx2.Response = vault.post(path, build(unknown), key)
    assert normalised(mine, theirs) == normalised(never, unknown)
    return mine


def unknown_id() -> str:
    return str(uuid.uuid4())


ID_ROUTES: list[tuple[str, Body]] = [
    ("/v1/memory/inspect", lambda i: {"memory_id": i}),
    ("/v1/memory/delete-ids", lambda i: {"ids": [i]}),
    (
        "/v1/memory/import-reflections",
        lambda i: {"tier": 2, "entries": [ENTRY], "source_ids": [i]},
    ),
]


@pytest.mark.parametrize(("path", "build"), ID_ROUTES, ids=[r[0] for r in ID_ROUTES])
def test_another_vaults_memory_ids_answer_like_unknown_ids(
    vault: Vault, owned: Owned, path: str, build: Body
) -> None:
    intruder = vault.new_key()
    before = vault.dump()
    for theirs in [*owned.raw_ids, owned.reflection_id]:
        response = assert_like_unknown(vault, intruder, path, build, theirs, unknown_id())
        for text in owned.texts:
            assert text not in response.text
    assert vault.dump() == before or path == "/v1/memory/delete-ids"
    # nothing of A was deleted or linked
    for memory_id in [*owned.raw_ids, owned.reflection_id]:
        assert vault.post("/v1/memory/inspect", {"memory_id": memory_id}).status_code == 200


@pytest.mark.parametrize("which", ["open", "committed"])
def test_another_vaults_batch_ids_answer_like_unknown_batches(
    vault: Vault, owned: Owned, which: str
) -> None:
    intruder = vault.new_key()
    theirs = owned.open_batch if which == "open" else owned.committed_batch

    def body(batch_id: str) -> dict[str, Any]:
        return {"batch_id": batch_id, "entries": [ENTRY]}

    response = assert_like_unknown(
        vault, intruder, "/v1/memory/consolidate/commit", body, theirs, new_batch_id()
    )
    assert response.status_code == 404
    # the owner can still commit its open batch
    if which == "open":
        mine = vault.post("/v1/memory/consolidate/commit", body(theirs))
        assert mine.status_code == 200, mine.text


def intruder_reads(vault: Vault, key: str) -> list[httpx2.Response]:
    query = {"query": "Zanzibar Quokka Xylophone database", "limit": 250}
    return [
        vault.post("/v1/memory/search", query, key),
        vault.post("/v1/memory/prepare", {"query": query["query"], "density": "xhigh"}, key),
        vault.post("/v1/memory/date-search", {"from": "1970-01-01"}, key),
        vault.post("/v1/memory/date-search", {"from": "1970-01-01", "query": "Zanzibar"}, key),
        vault.post("/v1/memory/consolidate/checkout", {"tier": 1}, key),
        vault.post("/v1/memory/consolidate/checkout", {"tier": 2}, key),
        vault.http.get("/v1/memory/stats", headers=vault.headers(key)),
        vault.http.get("/v1/usage", headers=vault.headers(key)),
        vault.http.get("/v1/keys/current", headers=vault.headers(key)),
    ]


def test_nothing_of_another_vault_shows_in_any_read(vault: Vault, owned: Owned) -> None:
    intruder = vault.new_key()
    vault.ingest("An unrelated note in the intruder's own vault.", key=intruder)
    owner_ref = vault.http.get("/v1/keys/current", headers=vault.headers()).json()["vault"]
    secrets = [*owned.texts, *owned.raw_ids, owned.reflection_id, owner_ref]
    secrets += [owned.open_batch, owned.committed_batch, vault.key]
    for response in intruder_reads(vault, intruder):
        assert response.status_code < 300, response.text
        for secret in secrets:
            assert secret not in response.text, (response.request.url, secret)
    stats = vault.http.get("/v1/memory/stats", headers=vault.headers(intruder)).json()
    assert stats["total_memories"] == 1


def test_wiping_or_deleting_in_one_vault_leaves_the_other_whole(vault: Vault, owned: Owned) -> None:
    intruder = vault.new_key()
    deleted = vault.post("/v1/memory/delete-ids", {"ids": owned.raw_ids}, intruder).json()
    assert (deleted["deleted"], deleted["not_found"]) == (0, len(owned.raw_ids))
    wiped = vault.http.delete("/v1/memory", headers=vault.headers(intruder))
    assert wiped.json()["deleted"] == 0
    stats = vault.http.get("/v1/memory/stats", headers=vault.headers()).json()
    assert stats["total_memories"] == len(owned.raw_ids) + 1
    assert json.dumps(stats).count("vr_") == 1
