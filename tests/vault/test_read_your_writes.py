"""Read your own writes by meaning, without embedding in the write: an ingest is answered
before anything is embedded, and the vault's next search embeds what its latest small writes
queued (at most ``limits.READ_YOUR_WRITES_UNITS`` units) before its vector side; a larger
write is left to the background worker."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from mcp_memoryrouter import limits
from mcp_memoryrouter.vault.indexer import EmbeddingWorker
from mcp_memoryrouter.vault.rules.domain import SearchFilter
from mcp_memoryrouter.vault.search.embeddings import Embedders, Vectors
from mcp_memoryrouter.vault.service import IncomingMessage, VaultService
from tests.support import FakeClock, StoreFactory
from tests.support.store import ComposedVault
from tests.vault.embedders import ConceptEmbedder


class Counted(ConceptEmbedder):
    """The concept embedder, noting each text it embeds (the embedder seam)."""

    texts: ClassVar[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        Counted.texts.extend(texts)
        return super().embed(texts)


@pytest.fixture
def composed(tmp_path: Path) -> Iterator[ComposedVault]:
    vault = ComposedVault(tmp_path)
    yield vault
    vault.http.close()
    vault.service.close()


@pytest.fixture
def counted(tmp_path: Path, new_store: StoreFactory) -> Iterator[VaultService]:
    Counted.texts.clear()
    store = new_store(tmp_path)
    embedders = Embedders({"concepts": Counted}, "concepts")
    worker = EmbeddingWorker(store, embedders)  # never started: only searches embed
    service = VaultService(
        store, clock=FakeClock(), lease_seconds=900, embedders=embedders, worker=worker
    )
    yield service
    service.close()


def test_the_readme_example_is_found_by_meaning_right_after_it_is_stored(
    composed: ComposedVault,
) -> None:
    composed.ingest("Ana prefers tea in the morning.", date="2026-01-30T10:00:00Z")
    composed.ingest("The cat sleeps on the sofa all afternoon.", date="2026-01-31T10:00:00Z")
    # as docs/api.md stores it, on a day of its own: a memory stored within 30 minutes of
    # another is embedded with it as the turn before, and "which database" then scores under
    # the relevance floor (docs/retrieval.md)
    (stored,) = composed.ingest("We chose Postgres for auth.")
    assert composed.pending() == 3  # answered before anything was embedded
    # no word of the query is in any memory: only the vectors can answer
    found = composed.post("/v1/memory/search", {"query": "which database", "limit": 3})
    memories: list[dict[str, object]] = found["memories"]  # type: ignore[assignment]
    assert [m["id"] for m in memories][:1] == [stored]
    assert composed.pending() == 0


def test_the_write_embeds_nothing_and_the_next_search_finds_it_by_meaning(
    counted: VaultService,
) -> None:
    access = counted.authenticate(counted.create_vault()[0])
    written = [IncomingMessage("user", "I drive an automobile", None)]
    outcome = counted.ingest(access, written, None)
    assert outcome.stored == 1 and Counted.texts == []  # the write answered unembedded
    assert counted.pending_embeddings(access) == 1
    hits, _ = counted.search(access, "car", 1, SearchFilter())  # no word in common
    assert [h.memory.content for h in hits] == ["I drive an automobile"]
    assert [t for t in Counted.texts if "automobile" in t] != []  # embedded by the search
    assert counted.pending_embeddings(access) == 0


def test_a_write_of_the_limit_is_embedded_by_the_search_and_one_more_unit_is_left_queued(
    counted: VaultService,
) -> None:
    access = counted.authenticate(counted.create_vault()[0])
    units = limits.READ_YOUR_WRITES_UNITS
    notes = [IncomingMessage("user", f"Garden note {n}", None) for n in range(units)]
    counted.ingest(access, notes, None)
    counted.search(access, "garden", 1, SearchFilter())
    assert counted.pending_embeddings(access) == 0
    log = [IncomingMessage("user", f"Travel log {n}", None) for n in range(units + 1)]
    counted.ingest(access, log, None)
    counted.search(access, "travel", 1, SearchFilter())
    assert counted.pending_embeddings(access) == units + 1  # the worker's
    assert units == 16


def test_only_the_vaults_latest_writes_are_embedded_by_its_search(
    counted: VaultService,
) -> None:
    access = counted.authenticate(counted.create_vault()[0])
    other = counted.authenticate(counted.create_vault()[0])
    big = [IncomingMessage("user", f"backlog {n}", None) for n in range(17)]
    counted.ingest(access, big, None)  # queued: more units than the limit
    counted.ingest(other, [IncomingMessage("user", "another vault's car", None)], None)
    for n in range(limits.READ_YOUR_WRITES_UNITS + 1):  # one more than are kept
        counted.ingest(access, [IncomingMessage("user", f"small write {n}", None)], None)
    counted.ingest(access, [IncomingMessage("user", "I drive an automobile", None)], None)
    Counted.texts.clear()
    hits, _ = counted.search(access, "car", 1, SearchFilter())
    assert [h.memory.content for h in hits] == ["I drive an automobile"]
    embedded = [t for t in Counted.texts if "car" not in t.split()]  # the query's own aside
    assert len(embedded) == limits.READ_YOUR_WRITES_UNITS
    left = ("backlog", "another", "small write 0", "small write 1")
    assert not any(t.rstrip(".").endswith(left) or "backlog" in t for t in embedded)
    # the backlog, the two oldest small writes and the other vault's write wait for the worker
    assert counted.pending_embeddings(access) == 17 + 2
    assert counted.pending_embeddings(other) == 1
