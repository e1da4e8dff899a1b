"""Read your own writes by meaning: a small ingest is embedded (with the real local model)
before it is answered; a large one stays queued for the background worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.app import build_service, create_vault_app
from mcp_memoryrouter.vault.indexer import EMBED_BEFORE_ACK, EmbeddingWorker
from mcp_memoryrouter.vault.rules.domain import SearchFilter
from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.service import IncomingMessage, VaultService
from tests.support import FakeClock, StoreFactory
from tests.vault.embedders import ConceptEmbedder


class Served:
    """The vault as ``serve`` composes it, except that the background worker never runs:
    whatever is embedded was embedded by the ingest itself."""

    def __init__(self, data_dir: Path) -> None:
        settings = Settings(data_dir=data_dir, embeddings="local", rate_limit_per_minute=0)
        self.service, kind = build_service(settings, clock=FakeClock(), start_worker=False)
        app = create_vault_app(settings, service=self.service, store_kind=kind)
        self.http = TestClient(app, raise_server_exceptions=False)
        self.key, _ = self.service.create_vault()

    def post(self, path: str, body: object) -> dict[str, object]:
        response = self.http.post(path, json=body, headers={"X-Memory-Key": self.key})
        assert response.status_code in (200, 202), response.text
        result: dict[str, object] = response.json()
        return result

    def ingest(self, *texts: str, date: str = "2026-02-01T10:00:00Z") -> list[str]:
        body = {"messages": [{"content": t, "date": date} for t in texts]}
        ids: list[str] = self.post("/v1/memory/ingest", body)["ids"]  # type: ignore[assignment]
        return ids

    def pending(self) -> object:
        response = self.http.get("/v1/memory/stats", headers={"X-Memory-Key": self.key})
        return response.json()["pending_embeddings"]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    vault = Served(tmp_path)
    yield vault
    vault.http.close()
    vault.service.close()


def test_the_readme_example_is_found_by_meaning_right_after_it_is_stored(
    served: Served,
) -> None:
    served.ingest("Ana prefers tea in the morning.", date="2026-01-30T10:00:00Z")
    served.ingest("The cat sleeps on the sofa all afternoon.", date="2026-01-31T10:00:00Z")
    # as docs/api.md stores it, on a day of its own: a memory stored within 30 minutes of
    # another is embedded with it as the turn before, and "which database" then scores under
    # the relevance floor (docs/retrieval.md)
    (stored,) = served.ingest("We chose Postgres for auth.")
    assert served.pending() == 0
    # no word of the query is in any memory: only the vectors can answer
    found = served.post("/v1/memory/search", {"query": "which database", "limit": 3})
    memories: list[dict[str, object]] = found["memories"]  # type: ignore[assignment]
    assert [m["id"] for m in memories][:1] == [stored]


def test_a_write_of_the_limit_is_embedded_and_one_more_unit_is_left_queued(
    served: Served,
) -> None:
    served.ingest(*[f"Note number {n} about the garden." for n in range(EMBED_BEFORE_ACK)])
    assert served.pending() == 0
    served.ingest(*[f"Entry {n} in the travel log." for n in range(EMBED_BEFORE_ACK + 1)])
    assert served.pending() == EMBED_BEFORE_ACK + 1
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
