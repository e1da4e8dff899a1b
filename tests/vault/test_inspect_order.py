"""Inspect's ``order``: the documented date order by default, or the sources most similar
to the inspected reflection first, each with its cosine score (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_memoryrouter.vault.search.embeddings import Embedders
from tests.support import StoreFactory, Vault, make_vault
from tests.support.api import assert_envelope, checkout, commit
from tests.vault.embedders import ConceptEmbedder

SOURCES = [  # oldest first
    ("lunch with a physician", "2026-03-01T09:00:00Z"),
    ("my car broke down on the road", "2026-03-02T09:00:00Z"),
    ("the kitten slept all day", "2026-03-03T09:00:00Z"),
    ("bought a used automobile at last", "2026-03-04T09:00:00Z"),
]
REFLECTION = "The car broke down and an automobile was bought."


@pytest.fixture
def embedded(tmp_path: Path, new_store: StoreFactory) -> Iterator[Vault]:
    embedders = Embedders({"concepts": ConceptEmbedder}, "concepts")
    vault = make_vault(tmp_path, embedders=embedders, store=new_store)
    yield vault
    vault.http.close()
    vault.store.close()


def reflect(vault: Vault) -> str:
    """A reflection over SOURCES, every row embedded except the kitten's."""
    for text, date in SOURCES:
        # "none": stored without a vector, as a row still waiting for its embedding
        vault.ingest(text, date=date, embeddings="none" if "kitten" in text else "concepts")
    batch = checkout(vault)
    done = commit(vault, batch["batch_id"], [{"text": REFLECTION, "importance": 6}])
    assert done.status_code == 200, done.text
    created = done.json()
    vault.worker.drain()
    reflection_id: str = created["created"][0]["id"]
    return reflection_id


def inspect(vault: Vault, memory_id: str, **extra: Any) -> dict[str, Any]:
    response = vault.post("/v1/memory/inspect", {"memory_id": memory_id, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_by_default_the_reflections_evidence_comes_first_then_the_rest_by_date(
    embedded: Vault,
) -> None:
    top = reflect(embedded)
    found = inspect(embedded, top)
    sources = found["sources"]
    contents = [s["content"] for s in sources]
    assert set(contents[:2]) == {SOURCES[1][0], SOURCES[3][0]}  # car, automobile: evidence
    assert contents[2:] == [SOURCES[0][0], SOURCES[2][0]]  # the rest of the batch, by date
    assert [s["evidence"]["rank"] for s in sources[:2]] == [1, 2]
    assert all("evidence" not in s for s in sources[2:]) and found["evidence_total"] == 2
    assert all("score" not in s for s in sources)


def test_order_similarity_lists_the_closest_sources_first_with_their_cosine(
    embedded: Vault,
) -> None:
    top = reflect(embedded)
    sources = inspect(embedded, top, order="similarity")["sources"]
    contents = [s["content"] for s in sources]
    assert set(contents[:2]) == {SOURCES[1][0], SOURCES[3][0]}  # car, automobile
    assert contents[2:] == [SOURCES[0][0], SOURCES[2][0]]  # then the physician; kitten last
    scores = [s.get("score") for s in sources]
    assert scores[3] is None  # no vector yet: last, without a score
    present = [s for s in scores if s is not None]
    assert present == sorted(present, reverse=True) and len(present) == 3
    assert 0.3 < present[0] <= 1.0 and present[2] < present[0]


def test_similarity_pages_continue_where_the_previous_page_ended(embedded: Vault) -> None:
    top = reflect(embedded)
    whole = [s["id"] for s in inspect(embedded, top, order="similarity")["sources"]]
    rest = inspect(embedded, top, order="similarity", offset=2)
    assert [s["id"] for s in rest["sources"]] == whole[2:]
    assert rest["sources_total"] == 4 and rest["truncated"] is False


def test_an_unknown_order_is_refused_in_the_envelope(embedded: Vault) -> None:
    top = reflect(embedded)
    response = embedded.post("/v1/memory/inspect", {"memory_id": top, "order": "random"})
    assert_envelope(response, 400, "invalid_request")
