"""The whole consolidation loop over HTTP against a real uvicorn on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import StoreFactory, Vault, live_server, make_vault
from tests.support.store import client, ingest_dated, reflect_until_empty


@pytest.fixture
def served(tmp_path: Path, new_store: StoreFactory) -> Iterator[tuple[Vault, str]]:
    vault = make_vault(tmp_path, store=new_store)
    with live_server(vault.app) as url:
        yield vault, url
    vault.store.close()


def lineage_pairs(vault: Vault) -> set[tuple[str, str]]:
    return {(p, c) for p, c in vault.sql("SELECT parent_id, child_id FROM lineage")}


def test_full_loop_consolidates_every_raw_memory_exactly_once(served: tuple[Vault, str]) -> None:
    vault, url = served
    with client(url, vault.key) as http:
        raw_ids = ingest_dated(http, 1000)
        assert len(set(raw_ids)) == 1000
        batches = reflect_until_empty(http, 1, 2000)
        sources = [s for b in batches for s in b["source_ids"]]
        assert sorted(sources) == sorted(raw_ids)  # every raw memory, exactly once
        dates = [m["date"] for b in batches for m in b["memories"]]
        assert dates == sorted(dates)  # oldest first, across batches
        debt = http.get("/v1/memory/stats").json()["reflection"]["unconsolidated"]
        assert debt["raw"] == {"units": 0, "est_tokens": 0, "importance_equiv": 0}
        pairs = lineage_pairs(vault)
        for batch in batches:
            for created in batch["commit"]["created"]:
                down = http.post("/v1/memory/inspect", json={"memory_id": created["id"]}).json()
                listed = [s["id"] for s in down["sources"]]
                assert sorted(listed) == sorted(batch["source_ids"])
                # the reflection's own evidence first, then the rest of its batch by date
                marked = [bool(s.get("evidence")) for s in down["sources"]]
                assert marked == sorted(marked, reverse=True)
                rest = [i for i, m in zip(listed, marked, strict=True) if not m]
                assert rest == [i for i in batch["source_ids"] if i in set(rest)]
                assert down["covers"] == batch["covers"]
                assert {(created["id"], s) for s in batch["source_ids"]} <= pairs
        up = http.post("/v1/memory/inspect", json={"memory_id": raw_ids[123]}).json()
        owner = next(b for b in batches if raw_ids[123] in b["source_ids"])
        assert sorted(r["id"] for r in up["consolidated_into"]) == sorted(
            c["id"] for c in owner["commit"]["created"]
        )
        reflections = [c["id"] for b in batches for c in b["commit"]["created"]]
        top = reflect_until_empty(http, 2, None)
        assert sorted(s for b in top for s in b["source_ids"]) == sorted(reflections)
        assert all(b["reflection_contract"]["target_tier"] == 3 for b in top)
        final = http.get("/v1/memory/stats").json()
        assert final["reflection"]["unconsolidated"]["tier2"]["count"] == 0
        assert final["tiers"]["3"]["count"] == 3 * len(top)


def test_parallel_checkouts_never_share_a_row(served: tuple[Vault, str]) -> None:
    vault, url = served
    with client(url, vault.key) as http:
        raw_ids = ingest_dated(http, 1200)
    taken: list[list[str]] = []
    errors: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        with client(url, vault.key) as http:
            while True:
                response = http.post(
                    "/v1/memory/consolidate/checkout", json={"tier": 1, "max_tokens": 1000}
                )
                if response.status_code != 200:
                    errors.append(response.text)
                    return
                batch = response.json()
                if batch["batch_id"] is None:
                    return
                with lock:
                    taken.append(batch["source_ids"])

    threads = [threading.Thread(target=worker) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    flat = [s for batch in taken for s in batch]
    assert len(flat) == len(set(flat)) == len(raw_ids)


def test_concurrent_commits_of_one_batch_write_once(served: tuple[Vault, str]) -> None:
    vault, url = served
    with client(url, vault.key) as http:
        ingest_dated(http, 50)
        batch = http.post("/v1/memory/consolidate/checkout", json={"tier": 1}).json()
    results: list[dict[str, Any]] = []
    barrier = threading.Barrier(10)

    def worker() -> None:
        with client(url, vault.key) as http:
            barrier.wait(timeout=30)
            response = http.post(
                "/v1/memory/consolidate/commit",
                json={
                    "batch_id": batch["batch_id"],
                    "entries": [{"text": "One reflection.", "importance": 4}] * 2,
                },
            )
            results.append({"status": response.status_code, **response.json()})

    threads = [threading.Thread(target=worker) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert {r["status"] for r in results} == {200}
    assert sorted(r["already_committed"] for r in results) == [False] + [True] * 9
    assert len({tuple(c["id"] for c in r["created"]) for r in results}) == 1
    with client(url, vault.key) as http:
        assert http.get("/v1/memory/stats").json()["tiers"]["2"]["count"] == 2
