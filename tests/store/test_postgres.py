"""What only the PostgreSQL store has to prove: migrations under a lock, replicas that
share one database without colliding, and the two vector paths."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import numpy.typing as npt
import psycopg
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from mcp_memoryrouter.cli import main
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.app import create_vault_app, open_store
from mcp_memoryrouter.vault.rules import selection
from mcp_memoryrouter.vault.rules.domain import Batch, Entry, NewRaw, SearchFilter
from mcp_memoryrouter.vault.search.vectors import Pending, VectorQuery
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.postgres import PostgresStore
from mcp_memoryrouter.vault.store.postgres import lexical as postgres_lexical
from mcp_memoryrouter.vault.store.postgres.schema import migrate
from tests import pg
from tests.support import T0

pytestmark = pytest.mark.postgres
DIM = 16


@pytest.fixture
def url(postgres_databases: pg.Databases) -> Iterator[str]:
    database = postgres_databases.create()
    yield database
    postgres_databases.release(database)


@pytest.fixture
def replicas(url: str) -> Iterator[Callable[[], PostgresStore]]:
    """Open stores over one database, as separate server processes would."""
    opened: list[PostgresStore] = []

    def open_one() -> PostgresStore:
        opened.append(PostgresStore(url, pool_min=0, pool_max=4, exact_max=50))
        return opened[-1]

    yield open_one
    for store in opened:
        store.close()


def raw(n: int, tokens: int = 10) -> list[NewRaw]:
    return [
        NewRaw(
            f"00000000-0000-4000-8000-{i:012d}",
            "user",
            f"moment {i}",
            tokens,
            T0 + i * 60_000,
            None,
            f"dedup-{i}",
            T0,
        )
        for i in range(n)
    ]


def test_migrating_again_or_concurrently_applies_each_script_once(
    postgres_databases: pg.Databases,
) -> None:
    fresh = postgres_databases.create()  # already migrated from the template
    versions: list[int] = []
    threads = [threading.Thread(target=lambda: versions.append(migrate(fresh))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    store = PostgresStore(fresh, pool_min=0)
    try:
        assert versions == [store.schema_version] * 4
        with store._pool.connection() as conn:
            row = conn.execute("SELECT count(*), max(version) FROM schema_migrations").fetchone()
        assert row == (store.schema_version, store.schema_version)
    finally:
        store.close()
        postgres_databases.release(fresh)


def test_parallel_checkouts_on_two_replicas_never_share_a_row(
    replicas: Callable[[], PostgresStore],
) -> None:
    one, two = replicas(), replicas()
    one.create_vault("v", "vr_v", T0)
    one.ingest("v", raw(400), None)
    rule = selection.Selection(100, None, None)  # ten rows a batch
    taken: list[str] = []
    lock = threading.Lock()

    def worker(store: PostgresStore, name: str) -> None:
        for n in range(100):
            batch = store.checkout("v", 1, rule, f"cb_{name}_{n}", T0, T0 + 900_000, None)
            if not isinstance(batch, Batch):
                return
            with lock:
                taken.extend(s.id for s in batch.sources)

    threads = [
        threading.Thread(target=worker, args=(store, f"{i}"))
        for i, store in enumerate([one, two, one, two, one, two, one, two])
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(taken) == len(set(taken)) == 400


def test_concurrent_commits_of_one_batch_on_two_replicas_write_once(
    replicas: Callable[[], PostgresStore],
) -> None:
    one, two = replicas(), replicas()
    one.create_vault("v", "vr_v", T0)
    one.ingest("v", raw(20), None)
    batch = one.checkout("v", 1, selection.selection_for(1, None), "cb_x", T0, T0 + 900_000, None)
    assert isinstance(batch, Batch)
    entries = [Entry("what happened", 5), Entry("and then", 6)]
    outcomes = []
    barrier = threading.Barrier(6)

    def commit(store: PostgresStore) -> None:
        barrier.wait(timeout=10)
        outcomes.append(store.commit("v", "cb_x", entries, T0 + 1, None))

    threads = [threading.Thread(target=commit, args=(s,)) for s in [one, two] * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(o.already_committed for o in outcomes) == [False] + [True] * 5
    assert len({tuple(c.id for c in o.created) for o in outcomes}) == 1
    assert one.stats("v").totals[2].count == 2
    assert one.counters("v").raw_units == 0


def unit(rng: np.random.Generator, n: int) -> npt.NDArray[np.float32]:
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    normed: npt.NDArray[np.float32] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return normed


def index_scans(store: PostgresStore) -> int:
    """Scans of the HNSW indexes so far (the store has one connection: its own counts are
    flushed when it next goes idle)."""
    with store._pool.connection() as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
    with store._pool.connection() as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes "
            "WHERE indexrelname LIKE 'vectors_hnsw_%'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_broad_queries_use_hnsw_and_selective_ones_score_exactly(url: str) -> None:
    # exact_max=50: a filter leaving fewer than 50 rows is scored exactly
    store = PostgresStore(url, pool_min=1, pool_max=1, exact_max=50)
    store.create_vault("v", "vr_v", T0)
    store.ingest("v", raw(300), "m")
    pending: list[Pending] = store.take_embed_batch("m", 1000)
    rng = np.random.default_rng(3)
    vectors = unit(rng, len(pending))
    store.put_vectors("m", pending, vectors)
    assert store.pending_embeddings("v") == 0
    store.warm([("m", DIM)])  # the embedding worker builds the index at start-up
    query = unit(rng, 1)[0]
    truth = np.argsort(-(vectors @ query))[:10]
    expected = [pending[i].row.seq for i in truth]

    def seqs(hits: list[str]) -> list[int]:
        return [int(h.rsplit("-", 1)[1]) + 1 for h in hits]

    before = index_scans(store)
    broad = store.search_vectors("v", VectorQuery("m", DIM, query), 10, SearchFilter())
    assert index_scans(store) > before  # the HNSW index answered
    assert seqs([h.memory.id for h in broad]) == expected  # at recall 1.0 on 300 rows
    assert broad[0].score == pytest.approx(float(vectors[truth[0]] @ query), abs=1e-5)

    window = (T0, T0 + 29 * 60_000)  # the first 30 rows only
    before = index_scans(store)
    selective = store.search_vectors(
        "v", VectorQuery("m", DIM, query), 10, SearchFilter(window=window)
    )
    assert index_scans(store) == before  # scored exactly, no index
    in_window = [i for i in np.argsort(-(vectors @ query)) if pending[i].row.seq <= 30][:10]
    assert seqs([h.memory.id for h in selective]) == [pending[i].row.seq for i in in_window]
    store.close()


def diary(n: int, rare_every: int, word: str) -> list[NewRaw]:
    """``n`` memories that all say ``word``; every ``rare_every``-th one also says "release"."""
    rows = raw(n)
    return [
        replace(r, content=f"{word} {i}: the release" if i % rare_every == 0 else f"{word} {i}")
        for i, r in enumerate(rows)
    ]


def test_a_word_in_most_of_the_vaults_memories_is_not_searched(url: str) -> None:
    store = PostgresStore(url, pool_min=1, pool_max=1)
    store.create_vault("v", "vr_v", T0)
    store.ingest("v", diary(1_200, rare_every=100, word="week"), None)
    # "week" is in every memory: searching for it would rank the whole vault. Like the
    # SQLite store, only the selective words are searched (no ANALYZE needed: the figures
    # are the vault's own); a word like "the" is one of them where it is rare.
    found = store.search_lexical("v", ["the", "week", "release"], 50, SearchFilter())
    assert {h.memory.content for h in found} == {
        f"week {i}: the release" for i in range(0, 1_200, 100)
    }
    assert len(found) == 12
    # When every word is common, the rarest is still searched.
    assert len(store.search_lexical("v", ["week", "weeks"], 50, SearchFilter())) == 50
    assert store.search_lexical("v", ["?!"], 50, SearchFilter()) == []  # no lexeme at all
    store.close()


def test_a_large_vaults_word_shares_come_from_its_most_recent_memories(url: str) -> None:
    store = PostgresStore(url, pool_min=1, pool_max=1)
    store.create_vault("v", "vr_v", T0)
    rows = raw(1_500)  # one a minute: the last 300 say "month", the first 1,200 "year"
    store.ingest("v", [replace(r, content=f"year {r.id}") for r in rows[:1_200]], None)
    store.ingest("v", [replace(r, content=f"month {r.id}") for r in rows[1_200:]], None)
    common = postgres_lexical.CommonTerms(sample_rows=300)
    with psycopg.connect(url, autocommit=True) as conn:
        # every sampled memory says "month"; none says "year", which is kept
        assert common.searchable(conn, "v", ["month", "year"]) == ["year"]
    store.close()


def test_word_statistics_are_read_again_after_a_minute(url: str) -> None:
    store = PostgresStore(url, pool_min=1, pool_max=1)
    store.create_vault("v", "vr_v", T0)
    store.ingest("v", diary(1_200, rare_every=100, word="day"), None)
    now = [0.0]
    common = postgres_lexical.CommonTerms(clock=lambda: now[0])
    with psycopg.connect(url, autocommit=True) as conn:
        assert common.searchable(conn, "v", ["year", "release"]) == ["year", "release"]
        later = [replace(r, id=f"later-{r.id}", dedup=f"later-{r.dedup}") for r in raw(2_000)]
        store.ingest("v", [replace(r, content=f"year {r.id}") for r in later], None)
        now[0] += postgres_lexical.STATS_TTL_S - 1
        assert common.searchable(conn, "v", ["year", "release"]) == ["year", "release"]
        now[0] += 1  # "year" is now in 2,000 of the vault's 3,200 memories
        assert common.searchable(conn, "v", ["year", "release"]) == ["release"]
    store.close()


def test_the_migrate_command_is_idempotent_on_both_stores(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    for database_url in (url, f"sqlite:///{tmp_path / 'vault.sqlite3'}"):
        monkeypatch.setenv("MEMORYROUTER_DATABASE_URL", database_url)
        first = runner.invoke(main, ["migrate", "--json"])
        again = runner.invoke(main, ["migrate", "--json"])
        assert first.exit_code == again.exit_code == 0, first.output
        assert first.output == again.output
        state = json.loads(first.output)["state"]  # the authorization server's and explorer's
        assert state == ({"oauth": 1, "ui": 1} if database_url == url else {})
    monkeypatch.setenv("MEMORYROUTER_DATABASE_URL", pg.with_database(url, "no_such_database"))
    assert runner.invoke(main, ["migrate"]).exit_code == 1


def test_a_postgresql_url_selects_the_postgresql_store_and_healthz_names_it(
    url: str, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, database_url=url, embeddings="none")
    store, kind = open_store(settings)
    try:
        assert (type(store), kind) == (PostgresStore, "postgresql")
        service = VaultService(store, clock=lambda: T0, lease_seconds=900)
        app = create_vault_app(settings, service=service, store_kind=kind)
        with TestClient(app) as http:
            assert http.get("/healthz").json()["store"] == "postgresql"
    finally:
        store.close()


def test_embedding_workers_on_two_replicas_share_the_queue(
    replicas: Callable[[], PostgresStore],
) -> None:
    one, two = replicas(), replicas()
    one.create_vault("v", "vr_v", T0)
    one.ingest("v", raw(10), "m")
    first, second = one.take_embed_batch("m", 6), two.take_embed_batch("m", 6)
    assert len(first) == 6 and len(second) == 4
    assert not {p.row.seq for p in first} & {p.row.seq for p in second}
    assert one.take_embed_batch("m", 6) == []  # everything is claimed
    rng = np.random.default_rng(5)
    one.put_vectors("m", first, unit(rng, len(first)))
    assert one.pending_embeddings("v") == 4  # the other replica's claim is still queued


def test_connections_the_server_dropped_are_replaced_before_use(
    url: str, postgres_databases: pg.Databases
) -> None:
    store = PostgresStore(url, pool_min=2, pool_max=2)
    try:
        store.create_vault("v", "vr_v", T0)
        with psycopg.connect(postgres_databases.admin_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (urlsplit(url).path.lstrip("/"),),
            )
        assert store.vault_count() == 1  # not a 503
        assert store.counters("v").raw_units == 0
    finally:
        store.close()
