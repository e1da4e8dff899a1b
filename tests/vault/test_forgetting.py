"""True forgetting: a derived delete takes every reflection built from what it deletes, the
reflections' other sources return to the pool, and a dry run says all of it first. Reflection
rows say how much of their support is gone. On SQLite and PostgreSQL, and under a concurrent
consolidation loop."""

from __future__ import annotations

import sqlite3
import threading
from importlib import resources
from pathlib import Path
from typing import Any

from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support import StoreFactory, Vault, live_server, make_vault
from tests.support.api import checkout, commit
from tests.support.store import client, current, ingest_dated, recount, reflect_until_empty

DELETE = "/v1/memory/delete-ids"


def ingest_three(vault: Vault, topic: str, day: int) -> list[str]:
    ids: list[str] = []
    for i in range(3):
        text = f"{topic} detail number {i}: something said about {topic}."
        ids += vault.ingest(text, date=f"2026-03-{day:02d}T0{i}:00:00Z")["ids"]
    return ids


def reflect(vault: Vault, tier: int, text: str, importance: int = 6) -> tuple[str, list[str]]:
    """Check out whatever is free at ``tier`` and commit one reflection: (its id, sources)."""
    batch = checkout(vault, tier=tier)
    assert batch["batch_id"] is not None
    done = commit(vault, batch["batch_id"], [{"text": text, "importance": importance}])
    assert done.status_code == 200, done.text
    return done.json()["created"][0]["id"], batch["source_ids"]


def three_tiers(vault: Vault) -> dict[str, Any]:
    """Raw a, b, c (three each); a -> A and b -> B at tier 2, A + B -> T at tier 3; c -> C
    stays an unconsolidated tier-2 reflection."""
    a = ingest_three(vault, "diagnosis", 1)
    big_a, _ = reflect(vault, 1, "The user talked about a diagnosis.")
    b = ingest_three(vault, "garden", 2)
    big_b, _ = reflect(vault, 1, "The user planted a garden.", importance=7)
    top, sources = reflect(vault, 2, "Health and home were on the user's mind.")
    assert sorted(sources) == sorted([big_a, big_b])
    c = ingest_three(vault, "cycling", 3)
    big_c, _ = reflect(vault, 1, "The user went cycling.")
    return {"a": a, "b": b, "c": c, "A": big_a, "B": big_b, "C": big_c, "T": top}


def support_kept_true(vault: Vault) -> None:
    """The support kept on each reflection equals a recount of its lineage."""
    kept = dict(
        (r[0], (r[1], r[2]))
        for r in vault.sql("SELECT id, sources_total, sources_deleted FROM memories WHERE tier > 1")
    )
    counted = {
        r[0]: (r[1], r[1] - r[2])
        for r in vault.sql(
            "SELECT l.parent_id, count(*), count(m.id) FROM lineage l "
            "LEFT JOIN memories m ON m.id = l.child_id GROUP BY l.parent_id"
        )
    }
    assert kept == {i: counted.get(i, (0, 0)) for i in kept}


def row(vault: Vault, memory_id: str) -> tuple[Any, ...]:
    found = vault.sql(
        "SELECT tier, consolidated, tokens, importance FROM memories WHERE id = ?", (memory_id,)
    )
    return found[0] if found else ()


def test_a_derived_delete_takes_every_reflection_above_and_frees_the_other_sources(
    vault: Vault,
) -> None:
    v = three_tiers(vault)
    before = current(vault)["unconsolidated"]
    planned = vault.post(DELETE, {"ids": [v["a"][0]], "derived": True, "dry_run": True})
    assert planned.status_code == 200, planned.text
    plan = planned.json()
    assert plan["dry_run"] is True and plan["deleted"] == 0 and plan["not_found"] == 0
    assert plan["by_tier"] == {"1": [v["a"][0]], "2": [v["A"]], "3": [v["T"]]}
    assert plan["returned_to_pool"] == {"1": 2, "2": 1}
    assert current(vault)["unconsolidated"] == before  # a dry run changes nothing
    assert row(vault, v["T"]) and row(vault, v["a"][0])

    done = vault.post(DELETE, {"ids": [v["a"][0]], "derived": True}).json()
    assert done["dry_run"] is False
    assert (done["requested"], done["deleted"], done["do_deleted"]) == (1, 3, 3)
    assert done["by_tier"] == plan["by_tier"]
    assert done["returned_to_pool"] == plan["returned_to_pool"]
    for gone in (v["a"][0], v["A"], v["T"]):
        assert row(vault, gone) == ()
    # the other sources of each reflection removed are unconsolidated again ...
    assert [row(vault, i)[1] for i in v["a"][1:]] == [0, 0]
    assert row(vault, v["B"])[1] == 0
    assert row(vault, v["b"][0])[1] == 1  # still covered by B, which lives
    # ... and the debt rose by exactly their amount, in the same write
    after = done["reflection"]["unconsolidated"]
    freed = [row(vault, i) for i in v["a"][1:]]
    assert after["raw"]["units"] == before["raw"]["units"] + 2
    assert after["raw"]["est_tokens"] == before["raw"]["est_tokens"] + sum(r[2] for r in freed)
    big_b = row(vault, v["B"])
    assert after["tier2"]["count"] == before["tier2"]["count"] + 1
    assert after["tier2"]["importance"] == before["tier2"]["importance"] + big_b[3]
    assert done["reflection"] == recount(vault)
    support_kept_true(vault)
    # the next consolidation rebuilds without the forgotten fact
    batch = checkout(vault, tier=1)
    assert sorted(batch["source_ids"]) == sorted(v["a"][1:])
    assert all("number 0" not in m["text"] for m in batch["memories"])
    again = checkout(vault, tier=2)
    assert sorted(again["source_ids"]) == sorted([v["B"], v["C"]])


def test_the_default_delete_keeps_reflections_and_rows_say_what_support_is_gone(
    vault: Vault,
) -> None:
    v = three_tiers(vault)
    body = vault.post(DELETE, {"ids": v["c"][:2]}).json()
    assert body["deleted"] == 2 and "by_tier" not in body and "dry_run" not in body
    assert row(vault, v["C"])  # the reflection stays: the document's rule
    found = vault.post("/v1/memory/search", {"query": "cycling"}).json()["memories"]
    cycling = next(r for r in found if r["id"] == v["C"])
    assert (cycling["sources_total"], cycling["sources_deleted"]) == (3, 2)
    assert "orphaned" not in cycling
    vault.post(DELETE, {"ids": [v["c"][2]]})
    rows = vault.post(
        "/v1/memory/date-search", {"from": "2026-03-01", "to": "2026-03-31", "tiers": [2, 3]}
    ).json()["memories"]
    by_id = {r["id"]: r for r in rows}
    assert by_id[v["C"]]["orphaned"] is True and by_id[v["C"]]["sources_deleted"] == 3
    assert by_id[v["T"]]["sources_total"] == 2 and by_id[v["T"]]["sources_deleted"] == 0
    assert all("sources_total" not in r for r in rows if r["tier"] == 1)
    context = vault.post(
        "/v1/memory/prepare",
        {"messages": [{"role": "user", "content": "cycling"}], "tiers": [2]},
    ).json()["context"]
    assert "every source of this reflection was deleted" in context
    down = vault.post("/v1/memory/inspect", {"memory_id": v["T"]}).json()
    assert {s["id"]: s["sources_deleted"] for s in down["sources"]} == {v["A"]: 0, v["B"]: 0}
    up = vault.post("/v1/memory/inspect", {"memory_id": v["C"]}).json()
    assert up["orphaned"] is True and up["sources_deleted"] == 3
    support_kept_true(vault)


def test_deleting_a_reflection_with_derived_takes_the_tier_above_and_frees_its_sources(
    vault: Vault,
) -> None:
    v = three_tiers(vault)
    done = vault.post(DELETE, {"ids": [v["B"]], "derived": True}).json()
    assert done["by_tier"] == {"2": [v["B"]], "3": [v["T"]]}
    # B's own sources return (nothing else covers them), and so does A (T covered it)
    assert done["returned_to_pool"] == {"1": 3, "2": 1}
    assert [row(vault, i)[1] for i in v["b"]] == [0, 0, 0]
    assert done["reflection"] == recount(vault)


def test_a_read_only_key_may_dry_run_but_not_delete(vault: Vault) -> None:
    v = three_tiers(vault)
    minted = vault.post("/v1/keys", {"read_only": True}).json()["key"]
    plan = vault.post(DELETE, {"ids": [v["a"][0]], "derived": True, "dry_run": True}, minted)
    assert plan.status_code == 200 and plan.json()["by_tier"]["3"] == [v["T"]]
    refused = vault.post(DELETE, {"ids": [v["a"][0]], "derived": True}, minted)
    assert refused.status_code == 403
    assert row(vault, v["T"])


def test_derived_deletes_under_a_concurrent_consolidation_loop(
    tmp_path: Path, new_store: StoreFactory
) -> None:
    vault = make_vault(tmp_path, store=new_store)
    forgotten: list[str] = []
    errors: list[str] = []
    with live_server(vault.app) as url, client(url, vault.key) as http:
        raw = ingest_dated(http, 600)
        stop = threading.Event()

        def consolidate() -> None:
            with client(url, vault.key) as loop:
                while not stop.is_set():
                    try:
                        reflect_until_empty(loop, 1, 400)
                        reflect_until_empty(loop, 2, None)
                    except AssertionError as exc:  # pragma: no cover - reported below
                        errors.append(str(exc))
                        return

        threads = [threading.Thread(target=consolidate) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            for target in raw[::40]:
                response = http.post(DELETE, json={"ids": [target], "derived": True})
                if response.status_code != 200:
                    errors.append(response.text)
                forgotten.append(target)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=120)
        reflect_until_empty(http, 1, 400)
        reflect_until_empty(http, 2, None)
        stats = http.get("/v1/memory/stats").json()
    assert errors == []
    # no live reflection is built on a memory that was forgotten with derived ...
    linked = vault.sql(
        "SELECT l.child_id FROM lineage l JOIN memories p ON p.id = l.parent_id "
        "WHERE l.child_id IN (" + ", ".join("?" * len(forgotten)) + ")",
        tuple(forgotten),
    )
    assert linked == []
    # ... every surviving raw memory is consolidated again, and the debt is a true recount
    left = vault.sql("SELECT count(*) FROM memories WHERE tier = 1 AND consolidated = 0")
    assert left[0][0] == 0
    assert stats["reflection"] == recount(vault)
    assert stats["tiers"]["1"]["count"] == len(raw) - len(forgotten)
    support_kept_true(vault)
    vault.store.close()


def test_reflections_made_before_support_was_kept_get_it_counted(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    folder = resources.files("mcp_memoryrouter.vault.migrations").joinpath("sqlite")
    for name in sorted(f.name for f in folder.iterdir() if f.name.endswith(".sql"))[:4]:
        conn.executescript(folder.joinpath(name).read_text(encoding="utf-8"))
    conn.execute("PRAGMA user_version = 4")
    conn.execute("INSERT INTO vaults (id, ref, created_ms) VALUES ('v', 'vr_old', 5)")
    conn.executemany(
        "INSERT INTO memories (id, vault_id, tier, content, tokens, date_from, date_to, "
        "created_ms, consolidated, importance) VALUES (?, 'v', ?, ?, 3, 1, 1, 1, ?, ?)",
        [("r1", 1, "one", 1, None), ("r2", 1, "two", 1, None), ("t", 2, "both", 0, 5)],
    )
    conn.executemany(
        "INSERT INTO lineage (parent_id, child_id, vault_id) VALUES ('t', ?, 'v')",
        [("r1",), ("r2",), ("gone",)],
    )
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    try:
        [memory] = store.with_support("v", [store.lineage("v", "t", 0, 10, None).memory])
        assert memory.support is not None
        assert (memory.support.total, memory.support.deleted) == (3, 1)
    finally:
        store.close()


def test_another_vaults_key_forgets_nothing_here(vault: Vault) -> None:
    v = three_tiers(vault)
    stranger, _ = vault.service.create_vault()  # a key of another vault
    before = vault.sql("SELECT count(*), sum(consolidated) FROM memories")
    for flags in ({"derived": True, "dry_run": True}, {"derived": True}):
        body = vault.post(DELETE, {"ids": [v["a"][0], v["A"]], **flags}, stranger).json()
        assert (body["deleted"], body["not_found"], body["by_tier"]) == (0, 2, {})
    assert vault.sql("SELECT count(*), sum(consolidated) FROM memories") == before
