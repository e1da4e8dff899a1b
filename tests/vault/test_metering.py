"""Metering without a writer transaction per call: usage events wait in memory and are
written in one transaction by the background worker (at least every
``limits.USAGE_FLUSH_SECONDS``), when the usage is read, when ``limits.USAGE_WAITING_MAX``
wait, and when the server stops. So a search runs while another connection holds SQLite's
write lock. On SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_memoryrouter import limits
from mcp_memoryrouter.vault.indexer import EmbeddingWorker
from mcp_memoryrouter.vault.rules.access import Access
from mcp_memoryrouter.vault.rules.domain import SearchFilter, UsageEvent
from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.service import IncomingMessage, VaultService
from mcp_memoryrouter.vault.store import Store
from mcp_memoryrouter.vault.store.postgres import PostgresStore
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support import AnyStore, FakeClock, StoreFactory


def written_events(store: Store, vault_id: str) -> int:
    """The usage events in the table (not those waiting in memory)."""
    row = store._read(
        lambda tx: tx.one("SELECT count(*) FROM usage_events WHERE vault_id = ?", (vault_id,))
    )
    return int(row[0]) if row else 0


@pytest.fixture
def service(tmp_path: Path, new_store: StoreFactory) -> Iterator[VaultService]:
    store = new_store(tmp_path)
    embedders = Embedders({}, "none")
    worker = EmbeddingWorker(store, embedders)  # started by the test that wants it
    vault = VaultService(
        store, clock=FakeClock(), lease_seconds=900, embedders=embedders, worker=worker
    )
    yield vault
    vault.close()


def stored(service: VaultService) -> Access:
    access = service.authenticate(service.create_vault()[0])
    service.ingest(access, [IncomingMessage("user", "Ana prefers green tea", None)], None)
    return access


def assert_metered(service: VaultService, access: Access, endpoint: str, calls: int) -> None:
    lines = [u for u in service.usage(access, 0, 2**62) if u.endpoint == endpoint]
    assert [(u.kind, u.events) for u in lines] == [("retrieval", calls)]


def test_a_search_is_metered_in_memory_and_counted_when_the_usage_is_read(
    service: VaultService,
) -> None:
    access = stored(service)
    store = service._store
    service.search(access, "tea", 5, SearchFilter())
    service.search(access, "tea", 5, SearchFilter())
    assert written_events(store, access.vault_id) == 0  # no write for a search (nor ingest)
    assert store.usage_waiting() == 1 + 2  # the ingest's storage, the two searches
    assert_metered(service, access, "search", 2)
    assert written_events(store, access.vault_id) == 1 + 2
    assert store.usage_waiting() == 0


def test_the_worker_writes_the_waiting_usage_within_its_interval(service: VaultService) -> None:
    access = stored(service)
    service.search(access, "tea", 5, SearchFilter())
    assert service.worker is not None
    service.worker.start()
    deadline = time.monotonic() + 3 * limits.USAGE_FLUSH_SECONDS + 5
    while written_events(service._store, access.vault_id) < 2:
        assert time.monotonic() < deadline, "the worker did not write the usage"
        time.sleep(0.05)
    assert service._store.usage_waiting() == 0


def test_the_usage_waiting_is_written_when_the_server_stops(
    tmp_path: Path, new_store: StoreFactory
) -> None:
    store = new_store(tmp_path)
    service = VaultService(store, clock=FakeClock(), lease_seconds=900)  # no worker at all
    access = stored(service)
    service.search(access, "tea", 5, SearchFilter())
    assert written_events(store, access.vault_id) == 0
    service.close()
    reopened: AnyStore = (
        SQLiteStore(store._path)
        if isinstance(store, SQLiteStore)
        else PostgresStore(store.url, pool_min=0, pool_max=1)
    )
    try:
        assert written_events(reopened, access.vault_id) == 2  # storage and the search
    finally:
        reopened.close()


def test_the_call_that_finds_the_bound_reached_writes_them(service: VaultService) -> None:
    access = stored(service)
    store = service._store
    event = UsageEvent("search", "retrieval", 1)
    for _ in range(limits.USAGE_WAITING_MAX - 2):
        store.record_usage(access.vault_id, [event], 1)
    assert store.usage_waiting() == limits.USAGE_WAITING_MAX - 1
    store.record_usage(access.vault_id, [event], 1)
    assert store.usage_waiting() == 0
    assert written_events(store, access.vault_id) == limits.USAGE_WAITING_MAX


@pytest.mark.parametrize("store_backend", ["sqlite"])
def test_a_search_runs_while_another_connection_holds_the_write_lock(
    service: VaultService,
) -> None:
    access = stored(service)
    service.search(access, "tea", 5, SearchFilter())  # the indexes loaded
    store = service._store
    assert isinstance(store, SQLiteStore)
    holder = sqlite3.connect(store._path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # SQLite's one writer lock, held by another connection
    found: list[int] = []
    try:
        search = threading.Thread(
            target=lambda: found.append(len(service.search(access, "tea", 5, SearchFilter())[0])),
            daemon=True,
        )
        search.start()
        search.join(timeout=5)
        assert found == [1], "the search waited for the write lock"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        search.join(timeout=60)
    assert_metered(service, access, "search", 2)
