"""Read your own writes by meaning: a small ingest is embedded (with the real local model)
before it is answered; a large one stays queued for the background worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_memoryrouter.vault.indexer import EMBED_BEFORE_ACK, EmbeddingWorker
from mcp_memoryrouter.vault.rules.domain import SearchFilter
from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.service import IncomingMessage, VaultService
from tests.support import FakeClock, StoreFactory
from tests.support.store import ComposedVault
from tests.vault.embedders import ConceptEmbedder


@pytest.fixture
def composed(tmp_path: Path) -> Iterator[ComposedVault]:
    vault = ComposedVault(tmp_path)
    yield vault
    vault.http.close()
    vault.service.close()


def test_the_readme_example_is_found_by_meaning_right_after_it_is_stored(
    composed: ComposedVault,
) -> None:
    composed.ingest("Ana prefers tea in the morning.", date="2026-01-30T10:00:00Z")
    composed.ingest("The cat sleeps on the sofa all afternoon.", date="2026-01-31T10:00:00Z")
    # as docs/api.md stores it, on a day of its own: a memory stored within 30 minutes of
    # another is embedded with it as the turn before, and "which database" then scores under
    # the relevance floor (docs/retrieval.md)
    (stored,) = composed.ingest("We chose Postgres for auth.")
    assert composed.pending() == 0
    # no word of the query is in any memory: only the vectors can answer
    found = composed.post("/v1/memory/search", {"query": "which database", "limit": 3})
    memories: list[dict[str, object]] = found["memories"]  # type: ignore[assignment]
    assert [m["id"] for m in memories][:1] == [stored]


def test_a_write_of_the_limit_is_embedded_and_one_more_unit_is_left_queued(
    composed: ComposedVault,
) -> None:
    composed.ingest(*[f"Note number {n} about the garden." for n in range(EMBED_BEFORE_ACK)])
    assert composed.pending() == 0
    composed.ingest(*[f"Entry {n} in the travel log." for n in range(EMBED_BEFORE_ACK + 1)])
    assert composed.pending() == EMBED_BEFORE_ACK + 1
    assert EMBED_BEFORE_ACK == 16


def test_each_store_embeds_only_the_writes_own_rows_before_answering(
    tmp_path: Path, new_store: StoreFactory
) -> None:
    store = new_store(tmp_path)
    embedders = Embedders({"concepts": ConceptEmbedder}, "concepts")
    worker = EmbeddingWorker(store, embedders)
    service = VaultService(store, clock=FakeClock(), lease_seconds=900, embedders=embedders)
    key, _ = service.create_vault()
    access = service.authenticate(key)
    big = [IncomingMessage("user", f"backlog {n}", None) for n in range(EMBED_BEFORE_ACK + 1)]
    service.ingest(access, big, None)  # queued: more units than the limit
    service.worker = worker
    service.ingest(access, [IncomingMessage("user", "I drive an automobile", None)], None)
    assert service.pending_embeddings(access) == EMBED_BEFORE_ACK + 1  # the backlog waits
    hits, _ = service.search(access, "car", 1, SearchFilter())
    assert [h.memory.content for h in hits] == ["I drive an automobile"]
    store.close()
