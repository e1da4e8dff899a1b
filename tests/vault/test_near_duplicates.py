"""Near-duplicates on write: an ingest with ``dedupe: "near"`` lists the memories already in
the vault its texts nearly repeat (``similar``: id and cosine) and does not store a text that
repeats one (``skipped``: the message and what it matched) while an update, which says a
detail the stored memory does not, is still stored. The default write compares nothing (it
embeds nothing before it answers). Without embeddings only the same text counts, at 1.0. On
SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from mcp_memoryrouter import limits
from mcp_memoryrouter.errors import StoreUnavailable
from mcp_memoryrouter.vault.search.embeddings import Embedders, Vectors
from tests.support import Vault
from tests.vault.embedders import ConceptEmbedder

DATE = "2026-02-01T10:00:00Z"


@pytest.fixture
def vault_embedders() -> Embedders:
    return Embedders({"concepts": ConceptEmbedder}, "concepts")


def ingest(vault: Vault, *texts: str, **extra: Any) -> dict[str, Any]:
    body = {"messages": [{"content": t, "date": DATE} for t in texts], **extra}
    response = vault.post("/v1/memory/ingest", body)
    assert response.status_code == 202, response.text
    answer: dict[str, Any] = response.json()
    return answer


def count(vault: Vault) -> int:
    return int(vault.sql("SELECT count(*) FROM memories")[0][0])


CAR = "I drive a red car to work every day of the week"
IN_PORTO = "I drive a red automobile to work every day of the week in Porto"  # a new detail


def test_a_text_in_other_words_is_listed_with_the_id_it_nearly_repeats(vault: Vault) -> None:
    (first,) = ingest(vault, CAR)["ids"]
    vault.worker.drain()
    again = ingest(vault, IN_PORTO, dedupe="near")
    assert again["stored"] == 1 and again["skipped"] == []  # Porto is new: an update
    ((found, score),) = [(s["id"], s["score"]) for s in again["similar"]]
    assert found == first and score >= limits.NEAR_DUPLICATE_COSINE


def test_the_default_write_compares_nothing_and_embeds_nothing(vault: Vault) -> None:
    ingest(vault, CAR)
    vault.worker.drain()
    embedder = vault.service.embedders.get("concepts")
    assert isinstance(embedder, ConceptEmbedder)
    calls = embedder.calls
    again = ingest(vault, "I drive a red automobile to work every day of the week")
    assert again["stored"] == 1 and "similar" not in again and "skipped" not in again
    assert embedder.calls == calls
    assert count(vault) == 2


def test_dedupe_near_skips_a_repeat_and_answers_the_id_it_matched(vault: Vault) -> None:
    (first,) = ingest(vault, "I drive a red car to work")["ids"]
    vault.worker.drain()
    answer = ingest(
        vault, "I drive a red automobile to work", "The cat sleeps on the sofa", dedupe="near"
    )
    assert (answer["stored"], answer["duplicates"]) == (1, 1)
    (skipped,) = answer["skipped"]
    assert (skipped["index"], skipped["id"]) == (0, first)
    assert skipped["score"] >= limits.NEAR_DUPLICATE_COSINE
    assert answer["ids"][0] == first and answer["ids"][1] != first
    assert count(vault) == 2
    assert "similar" not in answer  # what was stored repeats nothing


def test_dedupe_near_still_stores_an_update_that_says_a_new_detail(vault: Vault) -> None:
    ingest(vault, "The team meeting is in room 12 on the second floor")
    vault.worker.drain()
    answer = ingest(vault, "The team meeting is in room 14 on the second floor", dedupe="near")
    assert answer["stored"] == 1 and answer["skipped"] == []
    assert count(vault) == 2


def test_only_a_near_text_is_listed(vault: Vault) -> None:
    (first,) = ingest(vault, CAR)["ids"]
    vault.worker.drain()
    unrelated = ingest(vault, "Bought three kilos of apples at the market", dedupe="near")
    assert "similar" not in unrelated and unrelated["skipped"] == []
    near = ingest(vault, IN_PORTO, "Apples again", dedupe="near")
    assert [s["id"] for s in near["similar"]] == [first]


@pytest.mark.parametrize("dedupe", ["fuzzy", 1, None, ["near"]])
def test_a_bad_dedupe_is_refused_and_nothing_is_written(vault: Vault, dedupe: object) -> None:
    body = {"messages": [{"content": "should not be stored"}], "dedupe": dedupe}
    response = vault.post("/v1/memory/ingest", body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert [e["field"] for e in error["details"]["errors"]] == ["dedupe"]
    assert count(vault) == 0


@pytest.mark.parametrize("vault_embedders", [None])
def test_without_embeddings_only_the_same_text_counts(vault: Vault) -> None:
    ingest(vault, "Ana lives in Porto.")
    other_day = {"messages": [{"content": "  ana lives in   PORTO. ", "date": "2026-03-01"}]}
    unchecked = vault.post("/v1/memory/ingest", other_day).json()
    assert unchecked["stored"] == 1 and "similar" not in unchecked  # the default: no check
    paraphrase = ingest(vault, "Ana's home is in Porto.", dedupe="near")
    assert paraphrase["stored"] == 1 and paraphrase["skipped"] == []
    repeat = {**other_day, "dedupe": "near"}
    repeat["messages"] = [{"content": "Ana lives in Porto.", "date": "2026-04-01"}]
    skipped = vault.post("/v1/memory/ingest", repeat).json()
    assert skipped["stored"] == 0 and skipped["skipped"][0]["score"] == 1.0
    assert count(vault) == 3


class Unreachable(ConceptEmbedder):
    """An embedding service that does not answer."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        raise StoreUnavailable("the embedding service failed: ConnectError")


@pytest.mark.parametrize("vault_embedders", [Embedders({"down": Unreachable}, "down")])
def test_an_embedding_service_that_fails_leaves_the_same_text_check_and_the_write(
    vault: Vault,
) -> None:
    (first,) = ingest(vault, "Ana lives in Porto.")["ids"]
    again = {"messages": [{"content": "Ana lives in Porto.", "date": "2026-03-01"}]}
    checked = vault.post("/v1/memory/ingest", {**again, "dedupe": "near"})
    assert checked.status_code == 202, checked.text
    assert checked.json()["skipped"] == [{"index": 0, "id": first, "score": 1.0}]
    assert count(vault) == 1
