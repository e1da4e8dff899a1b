"""Facts that stay current: contract 2's related reflections and replaces, superseded rows
ranked after what replaced them, and standing preferences (docs/consolidation.md#contract-2).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mcp_memoryrouter import limits
from mcp_memoryrouter.tokens import est_tokens
from mcp_memoryrouter.vault.rules.contract import reflection_contract
from mcp_memoryrouter.vault.rules.current import gist
from mcp_memoryrouter.vault.rules.domain import Related
from tests.support import Vault
from tests.support.api import COMMIT, assert_envelope, checkout, commit
from tests.support.store import search

BOSTON = "Ana lives in Boston, in a flat near the harbour, with her two cats."
DENVER = "Ana moved from Boston to Denver in June 2026; the two cats came along."


def stats(vault: Vault) -> dict[str, Any]:
    response = vault.http.get("/v1/memory/stats", headers=vault.headers())
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def reflect(vault: Vault, entries: list[dict[str, Any]], **body: Any) -> dict[str, Any]:
    """Check out the vault's unconsolidated memories and commit ``entries`` for them."""
    batch = checkout(vault, **body)
    done = commit(vault, batch["batch_id"], entries)
    assert done.status_code == 200, done.text
    result: dict[str, Any] = done.json()
    return result


def moved(vault: Vault) -> tuple[str, str, dict[str, Any]]:
    """Ana's home in January, then her move in June, each consolidated with contract 2: (the
    old reflection's id, the new one's, the second checkout)."""
    vault.ingest(BOSTON, date="2026-01-05T10:00:00Z")
    old = reflect(vault, [{"text": BOSTON, "importance": 6}], contract=2)["created"][0]["id"]
    vault.ingest(DENVER, date="2026-06-05T10:00:00Z")
    batch = checkout(vault, contract=2)
    entry = {"text": DENVER, "importance": 7, "replaces": ["R1"], "cites": [1]}
    done = commit(vault, batch["batch_id"], [entry])
    assert done.status_code == 200, done.text
    return old, done.json()["created"][0]["id"], batch


def test_contract_1_is_byte_for_byte_what_it_was() -> None:
    digests = {
        tier: hashlib.sha256(
            json.dumps(reflection_contract(tier), sort_keys=True).encode()
        ).hexdigest()
        for tier in (1, 2)
    }
    assert digests == {
        1: "6fb8cfff85ac4a67b1246ec4438819327be5875332df26a885fda29561cbac8f",
        2: "5d4091ccfa7f848d89261d1a90c7128c3b95a4ccea7f53b1197b811d0ddc283a",
    }


def test_a_checkout_without_contract_shows_no_labels_and_no_line_numbers(vault: Vault) -> None:
    vault.ingest(BOSTON, date="2026-01-05T10:00:00Z")
    reflect(vault, [{"text": BOSTON, "importance": 6}])
    vault.ingest(DENVER, date="2026-06-05T10:00:00Z")
    batch = checkout(vault)
    assert batch["reflection_contract"] == reflection_contract(1)
    assert batch["memories"] == [{"text": DENVER, "date": "2026-06-05T10:00:00.000Z"}]


def test_contract_2_shows_the_related_reflections_by_label_and_never_an_id(vault: Vault) -> None:
    vault.ingest(BOSTON, date="2026-01-05T10:00:00Z")
    old = reflect(vault, [{"text": BOSTON, "importance": 6}], contract=2)["created"][0]["id"]
    vault.ingest(DENVER, date="2026-06-05T10:00:00Z")
    batch = checkout(vault, contract=2)
    contract = batch["reflection_contract"]
    assert contract["version"] == 2 and contract["labels"] == ["R1"]
    assert f"\n[R1] 2026-01-05: {BOSTON}\n" in contract["instructions"]
    assert old not in json.dumps(contract) and not limits.holds_an_id(contract["instructions"])
    assert set(contract["entry_schema"]) == {"text", "importance", "replaces", "cites", "kind"}
    assert batch["memories"] == [{"text": DENVER, "date": "2026-06-05T10:00:00.000Z", "line": 1}]


def test_replaces_marks_the_shown_reflection_superseded_and_keeps_it(vault: Vault) -> None:
    old, new, _ = moved(vault)
    page = vault.post("/v1/memory/inspect", {"memory_id": old}).json()
    assert page["content"] == BOSTON  # kept, with its lineage
    # no longer current since the line its successor cites was said, not since the commit
    assert page["superseded"] == {"at": "2026-06-05T10:00:00.000Z", "by": new}
    assert page["sources_total"] == 1
    assert "superseded" not in vault.post("/v1/memory/inspect", {"memory_id": new}).json()


def test_a_label_the_checkout_did_not_show_is_refused_and_nothing_is_written(
    vault: Vault,
) -> None:
    vault.ingest(BOSTON, date="2026-01-05T10:00:00Z")
    reflect(vault, [{"text": BOSTON, "importance": 6}], contract=2)
    vault.ingest(DENVER, date="2026-06-05T10:00:00Z")
    batch = checkout(vault, contract=2)
    entries = [{"text": DENVER, "importance": 7, "replaces": ["R2"]}]
    refused = vault.post(COMMIT, {"batch_id": batch["batch_id"], "entries": entries})
    assert_envelope(refused, 400, "invalid_request")
    error = refused.json()["error"]
    assert error["details"] == {"field": "entries[0].replaces"}
    assert "R2" in error["message"] and "R1" in error["message"]
    assert stats(vault)["tiers"]["2"]["count"] == 1  # nothing written
    again = commit(vault, batch["batch_id"], [{**entries[0], "replaces": ["R1"]}])
    assert again.status_code == 200 and again.json()["already_committed"] is False


def test_replaces_on_a_contract_1_batch_is_refused_with_what_to_do(vault: Vault) -> None:
    vault.ingest(BOSTON, date="2026-01-05T10:00:00Z")
    reflect(vault, [{"text": BOSTON, "importance": 6}])
    vault.ingest(DENVER, date="2026-06-05T10:00:00Z")
    batch = checkout(vault)
    entries = [{"text": DENVER, "importance": 7, "replaces": ["R1"]}]
    refused = vault.post(COMMIT, {"batch_id": batch["batch_id"], "entries": entries})
    assert_envelope(refused, 400, "invalid_request")
    assert '"contract": 2' in refused.json()["error"]["message"]


def test_a_label_that_is_not_a_label_is_refused_by_the_schema(vault: Vault) -> None:
    vault.ingest(BOSTON, date="2026-01-05T10:00:00Z")
    batch = checkout(vault, contract=2)
    entries = [{"text": BOSTON, "importance": 6, "replaces": ["the old one"]}]
    refused = vault.post(COMMIT, {"batch_id": batch["batch_id"], "entries": entries})
    assert_envelope(refused, 400, "invalid_request")


def test_search_ranks_the_current_fact_first_and_marks_the_old_one(vault: Vault) -> None:
    old, new, _ = moved(vault)
    rows = search(vault, "Does Ana live in Boston near the harbour?", tiers=[2])
    assert [r["id"] for r in rows] == [new, old]  # the old words match better; it follows
    assert "superseded" not in rows[0] and rows[1]["superseded"]["by"] == new
    current = search(vault, "Does Ana live in Boston near the harbour?", tiers=[2], current=True)
    assert [r["id"] for r in current] == [new]


def test_the_successor_is_brought_in_when_only_the_old_fact_matches(vault: Vault) -> None:
    old, new, _ = moved(vault)
    rows = search(vault, "harbour flat", tiers=[2])  # words only the old reflection holds
    assert [r["id"] for r in rows] == [new, old]


def test_the_moment_an_outdated_reflection_cited_follows_the_current_reflection(
    vault: Vault,
) -> None:
    _, new, _ = moved(vault)  # each entry cites its one line
    rows = search(vault, "Boston harbour flat")
    said_then = next(r for r in rows if r["tier"] == 1 and r["content"] == BOSTON)
    order = [r["id"] for r in rows]
    assert order.index(new) < order.index(said_then["id"])
    assert "superseded" not in said_then  # what was said then is kept, unmarked


def test_date_search_marks_and_leaves_out_superseded_rows(vault: Vault) -> None:
    old, new, _ = moved(vault)
    window = {"from": "2026-01-01", "to": "2026-12-31", "tiers": [2]}
    rows = vault.post("/v1/memory/date-search", window).json()["memories"]
    marked = {r["id"]: r.get("superseded") for r in rows}
    assert marked[new] is None and marked[old]["by"] == new
    current = vault.post("/v1/memory/date-search", {**window, "current": True}).json()
    assert [r["id"] for r in current["memories"]] == [new]
    ranked = vault.post("/v1/memory/date-search", {**window, "query": "Boston harbour"}).json()
    assert [r["id"] for r in ranked["memories"]] == [new, old]


def test_prepare_holds_only_current_reflections_unless_asked(vault: Vault) -> None:
    moved(vault)
    query = {"query": "Where does Ana live now, Boston?", "tiers": [2]}
    block = vault.post("/v1/memory/prepare", query).json()["context"]
    assert json.dumps(DENVER) in block and json.dumps(BOSTON) not in block
    every = vault.post("/v1/memory/prepare", {**query, "current": False}).json()["context"]
    assert f"{json.dumps(BOSTON)} (replaced on " in every


def test_a_chain_of_replacements_leads_to_the_newest(vault: Vault) -> None:
    old, middle, _ = moved(vault)
    vault.ingest("Ana left Denver for Lisbon in November 2026.", date="2026-11-05T10:00:00Z")
    batch = checkout(vault, contract=2)
    assert "R1" in batch["reflection_contract"]["labels"]
    shown = batch["reflection_contract"]["instructions"]
    assert DENVER in shown and BOSTON not in shown  # superseded reflections are not shown
    label = next(line.split("]")[0][1:] for line in shown.splitlines() if DENVER in line)
    entry = {"text": "Ana lives in Lisbon since November 2026.", "importance": 7}
    newest = commit(vault, batch["batch_id"], [{**entry, "replaces": [label]}]).json()
    rows = search(vault, "Boston harbour flat", tiers=[2])
    assert rows[0]["id"] == newest["created"][0]["id"]
    assert rows[0]["content"] == entry["text"]
    assert {r["id"] for r in rows[1:]} == {old, middle}
    page = vault.post("/v1/memory/inspect", {"memory_id": middle}).json()
    assert page["superseded"]["at"] == "2026-11-05T10:00:00.000Z"  # no cites: the batch's end


PREFERENCE = "Always give distances and weights in metric units."


def test_a_standing_preference_comes_first_in_every_prepare(vault: Vault) -> None:
    vault.ingest("Please always use metric units with me.", date="2026-01-05T10:00:00Z")
    reflect(vault, [{"text": PREFERENCE, "importance": 8, "kind": "preference"}], contract=2)
    vault.ingest("We planned a hike to the lake.", date="2026-02-05T10:00:00Z")
    reflect(vault, [{"text": "A hike to the lake was planned.", "importance": 5}], contract=2)
    block = vault.post("/v1/memory/prepare", {"query": "how long is the hike?"}).json()
    lines = block["context"].splitlines()
    assert lines[1] == "Standing preferences and instructions (always apply):"
    assert json.dumps(PREFERENCE) in lines[2]
    assert block["memories_found"] >= 2
    assert stats(vault)["preferences"] == 1
    found = search(vault, "units", kinds=["preference"])
    assert [(r["content"], r["kind"]) for r in found] == [(PREFERENCE, "preference")]


def test_a_changed_preference_replaces_the_old_one_in_the_block(vault: Vault) -> None:
    vault.ingest("Please always use metric units with me.", date="2026-01-05T10:00:00Z")
    reflect(vault, [{"text": PREFERENCE, "importance": 8, "kind": "preference"}], contract=2)
    vault.ingest("Actually, use miles for running, I think in miles.", date="2026-03-05T10:00:00Z")
    batch = checkout(vault, contract=2)
    assert PREFERENCE in batch["reflection_contract"]["instructions"]
    change = "Give running distances in miles; other measures in metric units."
    entry = {"text": change, "importance": 8, "kind": "preference", "replaces": ["R1"]}
    assert commit(vault, batch["batch_id"], [entry]).status_code == 200
    block = vault.post("/v1/memory/prepare", {"query": "a 10k run"}).json()["context"]
    assert json.dumps(change) in block and json.dumps(PREFERENCE) not in block
    assert stats(vault)["preferences"] == 1


def test_preferences_never_take_more_than_their_budget(vault: Vault) -> None:
    for n in range(40):
        vault.ingest(f"Standing rule number {n}: keep it.", date="2026-01-05T10:00:00Z")
    entries = [
        {"text": f"Standing rule {n}: " + "always " * 20, "importance": 8, "kind": "preference"}
        for n in range(40)
    ]
    reflect(vault, entries, contract=2)
    block = vault.post("/v1/memory/prepare", {"query": "rules", "max_tokens": 800}).json()
    section = block["context"].split("\n\n")[0].splitlines()[1:]
    assert 0 < est_tokens("\n".join(section)) <= 800 // 4


def test_the_longest_contract_2_fits_what_the_mcp_tool_reserves() -> None:
    shown = [
        Related(f"R{n}", 0, 0, gist("x" * 2_000, limits.RELATED_CHARS))
        for n in range(1, limits.RELATED_MAX + 1)
    ]
    longest = reflection_contract(1, 2, shown)
    assert 2 * est_tokens(json.dumps(longest)) + 100 <= limits.CONTRACT_TOKENS


def test_a_line_the_same_batch_changes_is_replaced_by_its_number(vault: Vault) -> None:
    vault.ingest(BOSTON, date="2026-01-05T10:00:00Z")
    vault.ingest(DENVER, date="2026-01-20T10:00:00Z")  # changed within one batch
    batch = checkout(vault, contract=2)
    assert [m["line"] for m in batch["memories"]] == [1, 2]
    beyond = [{"text": DENVER, "importance": 7, "replaces": ["L3"]}]
    refused = vault.post(COMMIT, {"batch_id": batch["batch_id"], "entries": beyond})
    assert_envelope(refused, 400, "invalid_request")
    assert "lines L1 to L2" in refused.json()["error"]["message"]
    entry = {"text": DENVER, "importance": 7, "replaces": ["L1"], "cites": [1, 2]}
    new = commit(vault, batch["batch_id"], [entry]).json()["created"][0]["id"]
    rows = search(vault, "Boston harbour flat")
    said_then = next(r for r in rows if r["content"] == BOSTON)
    assert said_then["superseded"]["by"] == new
    order = [r["id"] for r in rows]
    assert order.index(new) < order.index(said_then["id"])
    current = search(vault, "Boston harbour flat", current=True)
    assert BOSTON not in [r["content"] for r in current]
