"""Ingest on PostgreSQL is one statement per request, whatever the number of rows, and
answers exactly what the shared ingest answers: ids in input order, duplicates (earlier in
the vault, or earlier in the same request) mapped to the row they repeat, the counters and
the embedding queue moved by what was stored."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_memoryrouter.vault.rules.domain import NewRaw
from mcp_memoryrouter.vault.store.base import Store
from mcp_memoryrouter.vault.store.postgres import PostgresStore
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests import pg
from tests.store.recorder import Recording, recording_postgres

pytestmark = pytest.mark.postgres
MODEL = "local-test"


@pytest.fixture
def pg_url(postgres_databases: pg.Databases) -> Iterator[str]:
    url = postgres_databases.create()
    yield url
    postgres_databases.release(url)


def raw(text: str, i: int) -> NewRaw:
    return NewRaw(
        id=str(uuid.uuid4()),
        role="user",
        content=text,
        tokens=len(text) // 4 + 1,
        date_ms=1_767_225_600_000 + i * 60_000,
        session_id="s1" if i % 2 else None,
        dedup=f"dedup-{text}",
        created_ms=1_767_225_600_000,
    )


def with_vault(store: Store) -> str:
    vault_id = "v_" + uuid.uuid4().hex[:8]
    store.create_vault(vault_id, "vr_" + vault_id, 0)
    return vault_id


def test_ingesting_500_messages_is_one_statement(pg_url: str) -> None:
    store = PostgresStore(pg_url, pool_min=0, pool_max=2)
    try:
        vault_id = with_vault(store)
        rows = [raw(f"message number {i} about the garden", i) for i in range(500)]
        recording = Recording()
        with recording_postgres(recording, pg_url), recording.during("ingest") as executed:
            ids, stored, _ = store.ingest(vault_id, rows, MODEL)
        assert stored == 500 and ids == [r.id for r in rows]
        assert len(executed) == 1, [e.sql[:80] for e in executed]
    finally:
        store.close()


def test_it_answers_as_the_shared_ingest_does(pg_url: str, tmp_path: Path) -> None:
    """The same requests on SQLite (the shared, row-by-row ingest) and on PostgreSQL."""
    first = [raw("alpha", 0), raw("beta", 1), raw("alpha", 2), raw("gamma", 3)]
    second = [raw("beta", 4), raw("delta", 5), raw("delta", 6), raw("alpha", 7)]
    answers = []
    for store in (SQLiteStore(tmp_path / "v.sqlite3"), PostgresStore(pg_url, pool_max=2)):
        try:
            vault_id = with_vault(store)
            outcome = []
            for request in (first, second):
                ids, stored, tokens = store.ingest(vault_id, request, MODEL)
                by_id = {r.id: r.content for r in (*first, *second)}
                outcome.append(([by_id[i] for i in ids], stored, tokens))
            counters = store.counters(vault_id)
            queued = store.backlog(10**9, 10**9)
            answers.append((outcome, counters, queued.pending_embeddings))
        finally:
            store.close()
    sqlite, postgres = answers
    assert postgres == sqlite
    contents, stored, _ = sqlite[0][0]
    assert contents == ["alpha", "beta", "alpha", "gamma"] and stored == 3
    assert sqlite[0][1][1] == 1  # delta once; beta and alpha were there
