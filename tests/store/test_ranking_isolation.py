"""Ranking statistics are each vault's own, on both stores: how many memories a vault holds,
how long they are and how many of them hold a word decide its ranking and which query
words are too common to search; another vault's memories never move a result or a score
(they would reveal how common a word is in someone else's memories)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from starlette.testclient import TestClient

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.app import create_vault_app
from mcp_memoryrouter.vault.rules.domain import NewRaw, SearchFilter
from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.postgres import PostgresStore
from tests import pg
from tests.support import T0, AnyStore, FakeClock, StoreFactory, Vault

WORDS = ["kiwi", "pear", "plum", "fig", "lime", "grape", "apple", "the", "walked", "market"]
QUERIES = ["kiwi", "kiwi plum", "pear fig lime", "the grape", "walked to the market"]


@pytest.fixture(params=pg.BACKENDS if pg.available() else ["sqlite"])
def store_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


def searches(http: TestClient, key: str) -> list[bytes]:
    """The raw bytes of the search response for each query."""
    answers = []
    for query in QUERIES:
        response = http.post(
            "/v1/memory/search",
            json={"query": query, "limit": 25},
            headers={"Authorization": f"Bearer {key}"},
        )
        assert response.status_code == 200, response.text
        answers.append(response.content)
    return answers


def analyze(store: AnyStore) -> None:
    """What autovacuum does as a PostgreSQL table grows (nothing to do on SQLite)."""
    if isinstance(store, PostgresStore):
        with psycopg.connect(store.url, autocommit=True) as conn:
            conn.execute("ANALYZE memories")


def restarted(vault: Vault, tmp_path: Path) -> tuple[TestClient, AnyStore]:
    """A second process over the same database: nothing cached from the first one."""
    store = vault.reopen()
    embedders = Embedders({}, "none")
    service = VaultService(store, clock=FakeClock(), lease_seconds=900, embedders=embedders)
    kind = "postgresql" if isinstance(store, PostgresStore) else "sqlite"
    app = create_vault_app(Settings(data_dir=tmp_path), service=service, store_kind=kind)
    return TestClient(app, raise_server_exceptions=False), store


def test_a_vaults_search_answers_are_byte_identical_whatever_another_vault_holds(
    vault: Vault, tmp_path: Path
) -> None:
    rng = random.Random(5)
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(1, 12))) for _ in range(60)]
    vault.ingest(*texts)
    before = searches(vault.http, vault.key)

    # Another vault fills up with long memories holding every query word: in a shared
    # corpus they would shift every IDF and the average length, and make "kiwi" a word in
    # over half of all memories.
    other = vault.new_key()
    for start in range(0, 1_500, 750):
        vault.ingest(
            *(f"kiwi pear note {i} " + " ".join(WORDS * 3) for i in range(start, start + 750)),
            key=other,
        )
    analyze(vault.store)

    assert searches(vault.http, vault.key) == before  # the serving process, kept in step
    http, store = restarted(vault, tmp_path)
    try:
        assert searches(http, vault.key) == before  # and one that loads everything afresh
    finally:
        http.close()
        store.close()


def rows(vault: str, count: int, text: str) -> list[NewRaw]:
    return [
        NewRaw(
            f"{vault}-{i}", "user", text.format(i=i), 3, T0 + i * 60_000, None, f"{vault}-{i}", T0
        )
        for i in range(count)
    ]


@pytest.fixture
def store(tmp_path: Path, new_store: StoreFactory) -> Iterator[AnyStore]:
    opened = new_store(tmp_path)
    for name in ("diary", "other"):
        opened.create_vault(name, f"ref-{name}", T0)
    yield opened
    opened.close()


def test_a_word_in_most_of_a_vaults_memories_is_dropped_even_when_rare_elsewhere(
    store: AnyStore,
) -> None:
    diary = rows("diary", 1_200, "week {i}")
    diary = [
        replace(r, content=f"week {i}: the release") if i % 100 == 0 else r
        for i, r in enumerate(diary)
    ]
    store.ingest("diary", diary, None)
    store.ingest("other", rows("other", 3_000, "moment {i} of another life"), None)
    analyze(store)
    # "week" is in every memory of the diary (and in under a third of the whole database):
    # searching it would rank the whole vault, so only "release" is searched.
    found = store.search_lexical("diary", ["week", "release"], 50, SearchFilter())
    assert sorted(h.memory.id for h in found) == sorted(f"diary-{i}" for i in range(0, 1_200, 100))


def test_a_word_common_in_another_vault_is_still_searched_in_this_one(store: AnyStore) -> None:
    store.ingest("diary", rows("diary", 1_200, "note {i}"), None)
    store.ingest("diary", rows("diary-week", 40, "week {i} went well"), None)
    store.ingest("other", rows("other", 3_000, "week {i} of another life"), None)
    analyze(store)
    # In the diary "note" is the common word and "week" the selective one, whatever the
    # other vault says.
    found = store.search_lexical("diary", ["note", "week"], 50, SearchFilter())
    assert sorted(h.memory.id for h in found) == sorted(f"diary-week-{i}" for i in range(40))
