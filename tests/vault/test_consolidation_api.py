"""Checkout and commit: selection, leases, validation, replay, lineage, termination."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import Vault
from tests.support.api import CHECKOUT, COMMIT, assert_envelope, checkout, commit, seed


def test_checkout_returns_the_documented_batch_shape(vault: Vault) -> None:
    ids = seed(vault, 3)
    batch = checkout(vault)
    assert set(batch) == {
        "batch_id",
        "tier",
        "count",
        "est_tokens",
        "covers",
        "lease_expires_at",
        "memories",
        "source_ids",
        "reflection_contract",
        "tier_definitions",
    }
    assert batch["batch_id"].startswith("cb_") and len(batch["batch_id"]) >= 35
    assert (batch["tier"], batch["count"], batch["source_ids"]) == (1, 3, ids)
    assert batch["memories"][0] == {
        "text": "memory number 00000 " + "x" * 20,
        "date": "2026-02-01T00:00:00.000Z",
    }
    assert batch["covers"] == {"from": "2026-02-01T00:00:00.000Z", "to": "2026-02-01T00:00:02.000Z"}
    assert batch["lease_expires_at"] == "2026-01-01T00:15:00.000Z"
    assert batch["est_tokens"] == 30
    contract = batch["reflection_contract"]
    assert set(contract) == {
        "version",
        "target_tier",
        "instructions",
        "entry_schema",
        "min_entries",
        "max_entries",
        "recommended_entries",
    }
    assert (contract["target_tier"], contract["min_entries"], contract["max_entries"]) == (
        2,
        1,
        100,
    )
    assert batch["tier_definitions"]["target_tier"] == 2


def test_an_empty_vault_answers_the_termination_signal(vault: Vault) -> None:
    assert checkout(vault) == {"batch_id": None, "count": 0, "message": "nothing unconsolidated"}
    assert checkout(vault, tier=2)["batch_id"] is None


def test_selection_is_oldest_first_by_date_not_arrival(vault: Vault) -> None:
    late = vault.ingest("late", date="2026-03-01")["ids"]
    early = vault.ingest("early", date="2026-01-05")["ids"]
    assert checkout(vault)["source_ids"] == early + late


def test_tier1_batches_fill_the_token_budget(vault: Vault) -> None:
    seed(vault, 30, chars=400)  # 100 tokens each
    assert checkout(vault, max_tokens=1000)["count"] == 10
    assert checkout(vault, max_tokens=10)["count"] == 10  # clamped up to 1,000
    assert checkout(vault, max_tokens=1500.7)["count"] == 10  # the remaining rows fit


def test_commit_creates_reflections_links_lineage_and_marks_sources(vault: Vault) -> None:
    ids = seed(vault, 4)
    batch = checkout(vault)
    entries = [
        {"text": "They counted memories.", "importance": 8},
        {"text": "  It went fine.  ", "importance": 3},
    ]
    body = commit(vault, batch["batch_id"], entries).json()
    assert set(body) == {
        "batch_id",
        "committed",
        "already_committed",
        "tier",
        "created",
        "sources_consolidated",
        "reflection",
    }
    assert (body["committed"], body["already_committed"], body["tier"]) == (True, False, 2)
    assert [c["importance"] for c in body["created"]] == [8, 3]
    assert body["sources_consolidated"] == 4
    top = vault.post("/v1/memory/inspect", {"memory_id": body["created"][1]["id"]}).json()
    assert top["content"] == "It went fine."
    assert top["covers"] == batch["covers"]
    assert [s["id"] for s in top["sources"]] == ids
    up = vault.post("/v1/memory/inspect", {"memory_id": ids[0]}).json()
    assert sorted(r["id"] for r in up["consolidated_into"]) == sorted(
        c["id"] for c in body["created"]
    )
    assert checkout(vault)["batch_id"] is None


def test_checked_out_rows_are_excluded_from_other_checkouts(vault: Vault) -> None:
    seed(vault, 30, chars=400)
    first = checkout(vault, max_tokens=1000)
    second = checkout(vault, max_tokens=1000)
    assert not set(first["source_ids"]) & set(second["source_ids"])
    checkout(vault, max_tokens=1000)
    busy = checkout(vault)
    assert busy["batch_id"] is None and busy["count"] == 0
    assert "leased" in busy["message"]


def test_an_expired_lease_returns_rows_to_the_pool_and_its_commit_is_409(vault: Vault) -> None:
    seed(vault, 3)
    stale = checkout(vault)
    vault.clock.advance(899)
    assert checkout(vault)["batch_id"] is None
    vault.clock.advance(1)
    fresh = checkout(vault)
    assert fresh["source_ids"] == stale["source_ids"]
    assert_envelope(commit(vault, stale["batch_id"]), 409, "lease_expired")
    assert commit(vault, fresh["batch_id"]).status_code == 200


def test_commit_after_expiry_is_409_even_when_nobody_took_the_rows(vault: Vault) -> None:
    seed(vault, 2)
    batch = checkout(vault)
    vault.clock.advance(900)
    assert_envelope(commit(vault, batch["batch_id"]), 409, "lease_expired")
    assert checkout(vault)["count"] == 2


def test_replay_returns_the_original_ids_and_writes_nothing(vault: Vault) -> None:
    seed(vault, 3)
    batch = checkout(vault)
    first = commit(vault, batch["batch_id"]).json()
    stats_before = vault.http.get("/v1/memory/stats", headers=vault.headers()).json()
    usage_before = vault.http.get("/v1/usage", headers=vault.headers()).json()["totals"]
    vault.clock.advance(3600)  # replays are answered even after the lease ran out
    again = commit(vault, batch["batch_id"], [{"text": "Different words.", "importance": 2}])
    assert again.status_code == 200
    replay = again.json()
    assert replay["already_committed"] is True
    assert replay["created"] == first["created"]
    assert replay["sources_consolidated"] == first["sources_consolidated"]
    stats_after = vault.http.get("/v1/memory/stats", headers=vault.headers()).json()
    assert stats_after["total_memories"] == stats_before["total_memories"]
    usage_after = vault.http.get("/v1/usage", headers=vault.headers()).json()["totals"]
    assert usage_after["storage_tokens"] == usage_before["storage_tokens"]


def test_unknown_batches_and_batches_of_other_vaults_are_404(vault: Vault) -> None:
    other = vault.new_key()
    vault.ingest("theirs", key=other)
    foreign = vault.post(CHECKOUT, {"tier": 1}, other).json()["batch_id"]
    for batch_id in ("cb_" + "0" * 32, foreign):
        assert_envelope(commit(vault, batch_id), 404, "not_found")
    assert (
        vault.post(
            COMMIT, {"batch_id": foreign, "entries": [{"text": "ok", "importance": 1}]}, other
        ).status_code
        == 200
    )


@pytest.mark.parametrize(
    "entries",
    [
        [],
        [{"text": "ok", "importance": 5}] * 101,
        [{"text": "", "importance": 5}],
        [{"text": "x" * 8001, "importance": 5}],
        [{"text": "ok", "importance": 0}],
        [{"text": "ok", "importance": 11}],
        [{"text": "ok", "importance": 7.5}],
        [{"text": "ok", "importance": "7"}],
        [{"text": "ok", "importance": True}],
        [{"text": "ok"}],
        [{"text": "See 7c9e6679-7425-40de-944b-e07fc1f90ae7.", "importance": 5}],
        [{"text": "fine", "importance": 5}, {"text": 42, "importance": 5}],
    ],
)
def test_invalid_entries_are_400_and_nothing_is_written(vault: Vault, entries: Any) -> None:
    seed(vault, 2)
    batch = checkout(vault)
    assert_envelope(
        commit(vault, batch["batch_id"], entries)
        if entries
        else vault.post(COMMIT, {"batch_id": batch["batch_id"], "entries": []}),
        400,
        "invalid_request",
    )
    stats = vault.http.get("/v1/memory/stats", headers=vault.headers()).json()
    assert stats["tiers"]["2"]["count"] == 0
    assert commit(vault, batch["batch_id"]).status_code == 200  # the lease still holds


def test_an_entry_quoting_the_batch_id_is_refused(vault: Vault) -> None:
    seed(vault, 1)
    batch = checkout(vault)
    text = f"Summary of {batch['batch_id']}."
    assert_envelope(
        commit(vault, batch["batch_id"], [{"text": text, "importance": 4}]), 400, "invalid_request"
    )


def test_an_entry_holding_a_batch_id_glued_to_a_word_is_refused(vault: Vault) -> None:
    seed(vault, 1)
    batch = checkout(vault)
    text = f"See x{batch['batch_id']}."
    assert_envelope(
        commit(vault, batch["batch_id"], [{"text": text, "importance": 4}]), 400, "invalid_request"
    )


def test_an_unknown_batch_is_404_whatever_its_entries_say(vault: Vault) -> None:
    # an id the vault never makes: the entry's text is no batch id (the pattern
    # /openapi.json carries), so the batch is looked up, and is not there
    for batch_id, text in [("0", "0"), ("b1", "About b1 and cb_.")]:
        entries = [{"text": text, "importance": 4}]
        assert_envelope(commit(vault, batch_id, entries), 404, "not_found")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"tier": 3},
        {"tier": "1"},
        {"tier": 1, "max_tokens": "5"},
        {"tier": 1, "max_tokens": True},
    ],
)
def test_invalid_checkouts_are_400(vault: Vault, body: Any) -> None:
    assert_envelope(vault.post(CHECKOUT, body), 400, "invalid_request")


def test_tier2_checkout_is_importance_driven_and_commits_to_tier3(vault: Vault) -> None:
    seed(vault, 50, chars=400)  # five batches of 1,000 tokens, five reflections each
    created: list[str] = []
    while (batch := checkout(vault, max_tokens=1000))["batch_id"]:
        body = commit(
            vault,
            batch["batch_id"],
            [
                {"text": f"Reflection {n} about {batch['count']} moments.", "importance": 7}
                for n in range(5)
            ],
        ).json()
        created += sorted(c["id"] for c in body["created"])  # same window: ordered by id
    top = checkout(vault, tier=2)
    assert top["tier"] == 2
    assert top["reflection_contract"]["target_tier"] == 3
    assert top["count"] == 22  # 22 * 7 = 154 >= 150, the final row completes the batch
    assert top["source_ids"] == created[:22]
    done = commit(vault, top["batch_id"]).json()
    assert done["tier"] == 3
    tier3 = vault.post("/v1/memory/inspect", {"memory_id": done["created"][0]["id"]}).json()
    assert tier3["tier"] == 3 and tier3["sources_total"] == 22
    assert "consolidated_into" not in tier3


def test_a_source_deleted_during_the_lease_is_skipped_not_an_error(vault: Vault) -> None:
    ids = seed(vault, 3)
    batch = checkout(vault)
    vault.post("/v1/memory/delete-ids", {"ids": [ids[1]]})
    body = commit(vault, batch["batch_id"]).json()
    assert body["sources_consolidated"] == 2
    top = vault.post("/v1/memory/inspect", {"memory_id": body["created"][0]["id"]}).json()
    assert [s["id"] for s in top["sources"]] == [ids[0], ids[2]]


IMPORT = "/v1/memory/import-reflections"


def test_import_reflections_recreates_lineage_coverage_and_debt(vault: Vault) -> None:
    ids = seed(vault, 3)
    body = {
        "tier": 2,
        "entries": [{"text": "Imported reflection.", "importance": 7}],
        "source_ids": ids,
    }
    response = vault.post(IMPORT, body)
    assert response.status_code == 200, response.text
    created = response.json()["created"][0]
    assert created["importance"] == 7
    top = vault.post("/v1/memory/inspect", {"memory_id": created["id"]}).json()
    assert [s["id"] for s in top["sources"]] == ids
    assert top["covers"] == {"from": "2026-02-01T00:00:00.000Z", "to": "2026-02-01T00:00:02.000Z"}
    debt = response.json()["reflection"]["unconsolidated"]
    assert debt["raw"]["units"] == 0 and debt["tier2"] == {
        "count": 1,
        "importance": 7,
        "est_tokens": 5,
    }
    assert checkout(vault)["batch_id"] is None  # the sources are consolidated
    lone = vault.post(
        IMPORT,
        {
            "tier": 3,
            "entries": [{"text": "No sources left.", "importance": 9}],
            "covers": {"from": "2025-01-01", "to": "2025-12-31"},
        },
    )
    assert lone.status_code == 200


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"tier": 2, "entries": [{"text": "x", "importance": 1}], "source_ids": ["nope"]}, 404),
        ({"tier": 3, "entries": [{"text": "x", "importance": 1}], "source_ids": ["RAW"]}, 404),
        ({"tier": 2, "entries": [{"text": "x", "importance": 1}]}, 400),
        ({"tier": 1, "entries": [{"text": "x", "importance": 1}], "source_ids": ["RAW"]}, 400),
        ({"tier": 2, "entries": [], "source_ids": ["RAW"]}, 400),
    ],
)
def test_bad_imports_are_refused_and_write_nothing(
    vault: Vault, body: dict[str, Any], status: int
) -> None:
    raw = seed(vault, 1)[0]
    body = {**body, "source_ids": [raw if s == "RAW" else s for s in body.get("source_ids", [])]}
    assert vault.post(IMPORT, body).status_code == status
    assert checkout(vault)["count"] == 1


def test_import_refuses_sources_already_consolidated_and_read_only_keys(vault: Vault) -> None:
    ids = seed(vault, 2)
    body = {"tier": 2, "entries": [{"text": "x", "importance": 1}], "source_ids": ids}
    assert vault.post(IMPORT, body).status_code == 200
    assert_envelope(vault.post(IMPORT, body), 400, "invalid_request")
    read_only = vault.new_key(read_only=True)
    assert_envelope(vault.post(IMPORT, body, read_only), 403, "forbidden")


def test_an_imported_reflection_may_say_cb_in_its_prose(vault: Vault) -> None:
    body = {
        "tier": 3,
        "entries": [{"text": "We renamed every cb_ prefix in the schema.", "importance": 5}],
        "covers": {"from": "2025-01-01", "to": "2025-12-31"},
    }
    assert vault.post(IMPORT, body).status_code == 200
