"""Each entry's own evidence, through the REST API on SQLite and PostgreSQL: recorded at
commit and ranked (cited lines first), cites out of range refused with nothing written, the
weak flag in the answer, on a replay and on the page, inspect's evidence first with paging
across both parts, and a derived delete that follows evidence (its dry run showing both
ways)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_memoryrouter import limits
from mcp_memoryrouter.vault.search.embeddings import Embedders
from tests.support import StoreFactory, Vault, make_vault
from tests.support.api import COMMIT, assert_envelope, checkout, commit
from tests.vault.embedders import ConceptEmbedder

INSPECT = "/v1/memory/inspect"
DELETE = "/v1/memory/delete-ids"
# one batch, in date order (its lines 1 to 5 in the checkout's text)
SOURCES = [
    "The doctor said the knee surgery went well and recovery takes six weeks.",
    "We planted tomatoes and basil in the new garden beds on Saturday.",
    "The weather was grey and windy all afternoon.",
    "Physiotherapy for the knee starts next Monday at the clinic.",
    "The basil in the garden needs watering every morning.",
]
KNEE = "The knee surgery went well; physiotherapy at the clinic starts Monday."
GARDEN = "Tomatoes and basil were planted in the new garden beds, watered every morning."
UNSUPPORTED = "The user is learning Portuguese with an app on the train."


def batch_of(vault: Vault, texts: list[str] = SOURCES) -> dict[str, Any]:
    for day, text in enumerate(texts, 1):
        vault.ingest(text, date=f"2026-03-{day:02d}T09:00:00Z")
    return checkout(vault)


def committed(vault: Vault, batch_id: str, *entries: dict[str, Any]) -> dict[str, Any]:
    response = commit(vault, batch_id, list(entries))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def entry(text: str, **extra: Any) -> dict[str, Any]:
    return {"text": text, "importance": 6, **extra}


def evidence_rows(vault: Vault, reflection_id: str) -> list[tuple[str, int, bool]]:
    rows = vault.sql(
        "SELECT memory_id, rank, cited FROM evidence WHERE reflection_id = ? ORDER BY rank",
        (reflection_id,),
    )
    return [(r[0], int(r[1]), bool(r[2])) for r in rows]


def inspect(vault: Vault, memory_id: str, **extra: Any) -> dict[str, Any]:
    response = vault.post(INSPECT, {"memory_id": memory_id, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_each_entry_records_the_sources_that_support_it_best_first(vault: Vault) -> None:
    batch = batch_of(vault)
    ids = batch["source_ids"]
    done = committed(vault, batch["batch_id"], entry(KNEE), entry(GARDEN))
    knee, garden = (c["id"] for c in done["created"])
    assert {m for m, _, _ in evidence_rows(vault, knee)} == {ids[0], ids[3]}
    assert {m for m, _, _ in evidence_rows(vault, garden)} == {ids[1], ids[4]}
    assert all(not cited for _, _, cited in evidence_rows(vault, knee))
    # the batch lineage stays the document's: every source under every entry
    lineage = vault.sql("SELECT count(*) FROM lineage WHERE parent_id = ?", (knee,))
    assert lineage[0][0] == len(SOURCES)
    ranked = vault.sql("SELECT score FROM evidence WHERE reflection_id = ? ORDER BY rank", (knee,))
    scores = [float(r[0]) for r in ranked]
    assert scores == sorted(scores, reverse=True) and 0 < scores[-1] <= scores[0] <= 1


def test_cited_lines_come_first_marked_cited(vault: Vault) -> None:
    batch = batch_of(vault)
    ids = batch["source_ids"]
    done = committed(vault, batch["batch_id"], entry(KNEE, cites=[3]))
    found = evidence_rows(vault, done["created"][0]["id"])
    assert found[0] == (ids[2], 1, True)  # the weather line: cited, so first
    assert {m for m, _, _ in found[1:]} == {ids[0], ids[3]}


def test_a_cited_line_outside_the_batch_is_refused_and_nothing_is_written(
    vault: Vault,
) -> None:
    batch = batch_of(vault)
    entries = [entry(KNEE, cites=[1]), entry(GARDEN, cites=[2, len(SOURCES) + 1])]
    response = vault.post(COMMIT, {"batch_id": batch["batch_id"], "entries": entries})
    assert_envelope(response, 400, "invalid_request")
    assert response.json()["error"]["details"] == {"field": "entries[1].cites"}
    assert vault.sql("SELECT count(*) FROM memories WHERE tier = 2")[0][0] == 0
    assert vault.sql("SELECT count(*) FROM evidence")[0][0] == 0
    assert vault.sql("SELECT count(*) FROM memories WHERE consolidated = 1")[0][0] == 0
    # the batch is still open: the same commit with its cites in range goes through
    entries[1]["cites"] = [2]
    assert committed(vault, batch["batch_id"], *entries)["already_committed"] is False


def test_an_entry_no_source_supports_is_flagged_in_the_answer_its_replay_and_its_page(
    vault: Vault,
) -> None:
    batch = batch_of(vault)
    entries = [entry(KNEE), entry(UNSUPPORTED)]
    done = committed(vault, batch["batch_id"], *entries)
    supported, unsupported = done["created"]
    assert "weak_support" not in supported and unsupported["weak_support"] is True
    again = committed(vault, batch["batch_id"], *entries)
    assert again["already_committed"] is True and again["created"] == done["created"]
    assert inspect(vault, unsupported["id"])["weak_support"] is True
    assert "weak_support" not in inspect(vault, supported["id"])


def test_a_replayed_commit_records_nothing_twice(vault: Vault) -> None:
    batch = batch_of(vault)
    first = committed(vault, batch["batch_id"], entry(KNEE, cites=[2]), entry(GARDEN))
    before = vault.sql("SELECT reflection_id, memory_id, rank, cited FROM evidence ORDER BY 1, 2")
    # a replay with other cites changes nothing recorded
    again = committed(vault, batch["batch_id"], entry(KNEE, cites=[5]), entry(GARDEN))
    assert again["created"] == first["created"]
    after = vault.sql("SELECT reflection_id, memory_id, rank, cited FROM evidence ORDER BY 1, 2")
    assert after == before


def test_inspect_shows_the_evidence_first_then_the_rest_and_pages_across_both(
    vault: Vault,
) -> None:
    batch = batch_of(vault)
    ids = batch["source_ids"]
    done = committed(vault, batch["batch_id"], entry(KNEE, cites=[5]))
    knee = done["created"][0]["id"]
    whole = inspect(vault, knee)
    sources = whole["sources"]
    assert sources[0]["id"] == ids[4]  # cited first
    assert {s["id"] for s in sources[1:3]} == {ids[0], ids[3]}
    assert [s["id"] for s in sources[3:]] == [ids[1], ids[2]]  # the rest, by date
    marks = [s.get("evidence") for s in sources]
    assert marks[0] == {"rank": 1, "score": marks[0]["score"], "cited": True}
    assert [m["rank"] for m in marks[:3] if m] == [1, 2, 3] and marks[3:] == [None, None]
    assert whole["evidence_total"] == 3
    for offset in range(len(SOURCES)):
        page = inspect(vault, knee, offset=offset)
        assert [s["id"] for s in page["sources"]] == [s["id"] for s in sources[offset:]]
        assert page["sources"][0].get("evidence") == marks[offset]


def three_entries(vault: Vault) -> tuple[list[str], str, str]:
    """One batch, two entries: the knee's (evidence: lines 1, 4) and the garden's (2, 5)."""
    batch = batch_of(vault)
    done = committed(vault, batch["batch_id"], entry(KNEE), entry(GARDEN))
    knee, garden = (c["id"] for c in done["created"])
    return batch["source_ids"], knee, garden


def test_a_derived_delete_by_evidence_takes_only_the_reflections_it_supports(
    vault: Vault,
) -> None:
    ids, knee, garden = three_entries(vault)
    response = vault.post(DELETE, {"ids": [ids[0]], "derived": "evidence"})
    assert response.status_code == 200, response.text
    assert response.json()["by_tier"] == {"1": [ids[0]], "2": [knee]}
    left = {r[0] for r in vault.sql("SELECT id FROM memories WHERE tier = 2")}
    assert left == {garden}
    # the garden's reflection still covers every other source: none returns to the pool
    free = vault.sql("SELECT count(*) FROM memories WHERE tier = 1 AND consolidated = 0")
    assert free[0][0] == 0


def test_the_dry_run_shows_both_ways_so_a_person_can_pick(vault: Vault) -> None:
    ids, knee, garden = three_entries(vault)
    for derived in (True, "evidence"):
        response = vault.post(DELETE, {"ids": [ids[3]], "derived": derived, "dry_run": True})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["choices"] == {
            "lineage": {
                "by_tier": {"1": [ids[3]], "2": sorted([knee, garden])},
                "returned_to_pool": {"1": len(SOURCES) - 1},
            },
            "evidence": {"by_tier": {"1": [ids[3]], "2": [knee]}, "returned_to_pool": {}},
        }
        way = "lineage" if derived is True else "evidence"
        assert body["by_tier"] == body["choices"][way]["by_tier"]
    assert vault.sql("SELECT count(*) FROM memories")[0][0] == len(SOURCES) + 2
    plain = vault.post(DELETE, {"ids": [ids[3]], "dry_run": True}).json()
    assert "choices" not in plain


def test_a_reflection_without_recorded_evidence_follows_its_lineage(vault: Vault) -> None:
    _, knee, garden = three_entries(vault)
    vault.ingest("A loose note about the knee.", date="2026-03-09T09:00:00Z")
    [loose] = vault.sql("SELECT id FROM memories WHERE tier = 1 AND consolidated = 0")
    imported = vault.post(
        "/v1/memory/import-reflections",
        {"tier": 2, "entries": [entry("Something unrelated.")], "source_ids": [loose[0]]},
    )
    assert imported.status_code == 200, imported.text
    old = imported.json()["created"][0]["id"]
    response = vault.post(DELETE, {"ids": [loose[0]], "derived": "evidence"})
    assert response.json()["by_tier"] == {"1": [loose[0]], "2": [old]}
    assert {r[0] for r in vault.sql("SELECT id FROM memories WHERE tier = 2")} == {knee, garden}


# --- with an embedding model: cosine in the vault's default model -----------------------


@pytest.fixture
def embedded(tmp_path: Path, new_store: StoreFactory) -> Iterator[Vault]:
    vault = make_vault(
        tmp_path, embedders=Embedders({"concepts": ConceptEmbedder}, "concepts"), store=new_store
    )
    yield vault
    vault.http.close()
    vault.store.close()


def test_with_a_model_evidence_is_found_by_meaning_also_before_sources_are_embedded(
    embedded: Vault,
) -> None:
    """No word in common, the same concepts: the cosine finds it; the physician's row waits
    for its vector (ingested without one), so it is embedded at commit."""
    embedded.ingest("automobile vehicle", date="2026-03-01T09:00:00Z")
    embedded.ingest("physician physician", date="2026-03-02T09:00:00Z", embeddings="none")
    embedded.ingest("grey skies and wind", date="2026-03-03T09:00:00Z")
    embedded.worker.drain()
    batch = checkout(embedded)
    ids = batch["source_ids"]
    done = committed(embedded, batch["batch_id"], entry("car"), entry("doctor"))
    car, doctor = (c["id"] for c in done["created"])
    assert [m for m, _, _ in evidence_rows(embedded, car)] == [ids[0]]
    assert [m for m, _, _ in evidence_rows(embedded, doctor)] == [ids[1]]
    assert all("weak_support" not in c for c in done["created"])
    # the reflections were embedded to be scored, and their vectors kept: nothing queued
    assert embedded.sql("SELECT count(*) FROM embed_queue")[0][0] == 0
    assert embedded.sql("SELECT count(*) FROM vectors")[0][0] == 4


def test_the_bound_of_evidence_per_entry_holds(vault: Vault) -> None:
    texts = [f"Knee physiotherapy session {n} at the clinic." for n in range(12)]
    batch = batch_of(vault, texts)
    done = committed(vault, batch["batch_id"], entry("Knee physiotherapy at the clinic."))
    assert len(evidence_rows(vault, done["created"][0]["id"])) == limits.EVIDENCE_MAX
