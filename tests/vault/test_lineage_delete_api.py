"""Inspect down and up, delete by id, wipe, stats, usage."""

from __future__ import annotations

from typing import Any

from tests.support import Vault
from tests.support.api import assert_envelope, checkout, commit, seed


def inspect(vault: Vault, memory_id: str, **extra: Any) -> dict[str, Any]:
    response = vault.post("/v1/memory/inspect", {"memory_id": memory_id, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_inspect_pages_sources_500_at_a_time(vault: Vault) -> None:
    messages = [
        {
            "content": f"moment {i}",
            "date": f"2026-02-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
        }
        for i in range(1203)
    ]
    for start in range(0, 1203, 500):
        vault.post("/v1/memory/ingest", {"messages": messages[start : start + 500]})
    batch = checkout(vault)
    assert batch["count"] == 1203
    top = commit(vault, batch["batch_id"]).json()["created"][0]["id"]
    seen: list[str] = []
    offset = 0
    while True:
        page = inspect(vault, top, offset=offset)
        assert page["sources_total"] == 1203 and page["sources_deleted"] == 0
        seen += [s["id"] for s in page["sources"]]
        if not page["truncated"]:
            break
        assert len(page["sources"]) == 500
        offset = page["next_offset"]
    assert seen == batch["source_ids"]


def test_deleted_sources_are_counted_never_errors_and_reflections_survive(vault: Vault) -> None:
    ids = seed(vault, 5)
    batch = checkout(vault)
    top = commit(vault, batch["batch_id"]).json()["created"][0]["id"]
    body = vault.post("/v1/memory/delete-ids", {"ids": ids[:2]}).json()
    assert {
        k: body[k]
        for k in (
            "requested",
            "deleted",
            "do_deleted",
            "not_found",
            "legacy_fallback_used",
            "failed",
        )
    } == {
        "requested": 2,
        "deleted": 2,
        "do_deleted": 2,
        "not_found": 0,
        "legacy_fallback_used": 0,
        "failed": [],
    }
    page = inspect(vault, top)
    assert (page["sources_total"], page["sources_deleted"]) == (5, 2)
    assert [s["id"] for s in page["sources"]] == ids[2:]


def test_deleting_a_reflection_is_just_deleting_its_id(vault: Vault) -> None:
    ids = seed(vault, 2)
    body = commit(vault, checkout(vault)["batch_id"]).json()
    reflection = body["created"][0]["id"]
    assert vault.post("/v1/memory/delete-ids", {"ids": [reflection]}).json()["deleted"] == 1
    assert_envelope(vault.post("/v1/memory/inspect", {"memory_id": reflection}), 404, "not_found")
    assert inspect(vault, ids[0])["consolidated_into"] == []
    assert vault.post("/v1/memory/search", {"query": "reflection"}).json()["memories"] == []


def test_delete_counts_unknown_and_repeated_ids_honestly(vault: Vault) -> None:
    ids = seed(vault, 1)
    body = vault.post("/v1/memory/delete-ids", {"ids": [ids[0], ids[0], "not-an-id"]}).json()
    assert (body["requested"], body["deleted"], body["not_found"]) == (2, 1, 1)


def test_deleted_memories_leave_the_lexical_index(vault: Vault) -> None:
    ids = vault.ingest("zebra migration notes", "zebra second note")["ids"]
    vault.post("/v1/memory/delete-ids", {"ids": [ids[0]]})
    hits = vault.post("/v1/memory/search", {"query": "zebra"}).json()["memories"]
    assert [h["id"] for h in hits] == [ids[1]]


def test_delete_ids_bounds_are_1_to_500(vault: Vault) -> None:
    assert_envelope(vault.post("/v1/memory/delete-ids", {"ids": []}), 400, "invalid_request")
    too_many = [f"id-{i}" for i in range(501)]
    assert_envelope(vault.post("/v1/memory/delete-ids", {"ids": too_many}), 400, "invalid_request")


def test_wipe_empties_the_vault_and_its_indexes_but_not_other_vaults(vault: Vault) -> None:
    other = vault.new_key()
    vault.ingest("zebra kept elsewhere", key=other)
    seed(vault, 3)
    commit(vault, checkout(vault)["batch_id"])
    response = vault.http.delete("/v1/memory", headers=vault.headers())
    assert response.status_code == 200
    assert response.json()["deleted"] == 4
    stats = vault.http.get("/v1/memory/stats", headers=vault.headers()).json()
    assert stats["total_memories"] == 0 and stats["oldest"] is None
    assert vault.post("/v1/memory/search", {"query": "memory"}).json()["memories"] == []
    assert checkout(vault)["batch_id"] is None
    assert len(vault.post("/v1/memory/search", {"query": "zebra"}, other).json()["memories"]) == 1


def test_stats_report_tiers_totals_dates_and_debt(vault: Vault) -> None:
    vault.ingest("old", date="2025-12-31T23:59:59Z")
    vault.ingest("new", date="2026-03-01")
    commit(vault, checkout(vault)["batch_id"], [{"text": "Two moments.", "importance": 9}])
    stats = vault.http.get("/v1/memory/stats", headers=vault.headers()).json()
    assert stats["vault"].startswith("vr_") and vault.key not in str(stats)
    assert stats["tiers"]["1"] == {"count": 2, "est_tokens": 2}
    assert stats["tiers"]["2"] == {"count": 1, "est_tokens": 3, "importance": 9}
    assert (stats["total_memories"], stats["total_tokens"]) == (3, 5)
    assert stats["oldest"] == "2025-12-31T23:59:59.000Z"
    assert stats["newest"] == "2026-03-01T00:00:00.000Z"
    assert stats["reflection"]["unconsolidated"]["tier2"] == {
        "count": 1,
        "importance": 9,
        "est_tokens": 3,
    }


def test_usage_meters_per_the_billing_table(vault: Vault) -> None:
    ids = vault.ingest("a" * 40, "b" * 40, session_id="s-1")["ids"]  # 10 tokens each
    vault.ingest("a" * 40, session_id="s-1")  # a duplicate: not stored, not billed
    empty = {"tier": 2}
    assert vault.post("/v1/memory/consolidate/checkout", empty).json()["batch_id"] is None
    batch = vault.post("/v1/memory/consolidate/checkout", {"tier": 1, "session_id": "s-2"}).json()
    created = vault.post(
        "/v1/memory/consolidate/commit",
        {
            "batch_id": batch["batch_id"],
            "session_id": "s-2",
            "entries": [{"text": "c" * 20, "importance": 5}],
        },
    ).json()["created"]
    vault.post(
        "/v1/memory/consolidate/commit",
        {"batch_id": batch["batch_id"], "entries": [{"text": "c" * 20, "importance": 5}]},
    )
    inspect(vault, created[0]["id"])
    vault.post("/v1/memory/delete-ids", {"ids": [ids[0]]})
    usage = vault.http.get("/v1/usage", headers=vault.headers()).json()
    by = usage["by_endpoint"]
    assert by["ingest"] == {
        "events": 1,
        "retrieval_tokens": 0,
        "storage_tokens": 20,
        "deletion_tokens": 0,
    }
    assert by["checkout"]["events"] == 1 and by["checkout"]["retrieval_tokens"] == 20
    assert by["commit"] == {
        "events": 1,
        "retrieval_tokens": 0,
        "storage_tokens": 5,
        "deletion_tokens": 0,
    }
    assert by["inspect"]["retrieval_tokens"] == 20
    assert by["delete-ids"]["deletion_tokens"] == 10
    assert usage["by_session"]["s-1"]["storage_tokens"] == 20
    assert usage["by_session"]["s-2"]["storage_tokens"] == 5
    assert usage["vault"].startswith("vr_")


def test_a_usage_period_that_ends_before_it_starts_holds_no_events(vault: Vault) -> None:
    # JSON Schema cannot compare from with to, so /openapi.json allows it: no 400
    vault.ingest("counted on 2026-02-01", date="2026-02-01")
    response = vault.http.get("/v1/usage?from=2026-02-02&to=2026-02-01", headers=vault.headers())
    assert response.status_code == 200, response.text
    assert response.json()["totals"]["events"] == 0
    assert response.json()["period"] == {
        "from": "2026-02-02T00:00:00.000Z",
        "to": "2026-02-01T23:59:59.999Z",
    }


def test_usage_up_to_the_first_days_of_year_1_starts_on_0001_01_01(vault: Vault) -> None:
    response = vault.http.get("/v1/usage?to=0001-01-02", headers=vault.headers())
    assert response.status_code == 200, response.text
    assert response.json()["period"]["from"] == "0001-01-01T00:00:00.000Z"


def test_health_and_openapi_are_public(vault: Vault) -> None:
    health = vault.http.get("/healthz").json()
    assert health["status"] == "ok" and health["store"] == vault.kind
    spec = vault.http.get("/openapi.json").json()
    assert "/v1/memory/consolidate/checkout" in spec["paths"]


def test_unknown_routes_and_methods_use_the_envelope(vault: Vault) -> None:
    assert_envelope(vault.http.get("/v1/nothing"), 404, "not_found")
    assert_envelope(vault.http.get("/v1/memory/search"), 405, "method_not_allowed")


def test_reopening_the_store_keeps_data_and_reapplies_no_migration(vault: Vault) -> None:
    vault.ingest("kept across restarts")
    again = vault.reopen()
    try:
        assert again.schema_version == vault.store.schema_version >= 1
        assert again.vault_count() == 1
    finally:
        again.close()
