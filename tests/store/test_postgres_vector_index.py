"""The HNSW index of a model on PostgreSQL is built off the request path: a search never
builds it (at 100k vectors that took minutes, and every search waited), a broad search
scores exactly until the index is valid, and a build a crash left invalid is redone."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import psycopg
import pytest
from psycopg import sql

from mcp_memoryrouter.vault.rules.domain import ScoredMemory, SearchFilter
from mcp_memoryrouter.vault.search.vectors import VectorQuery
from mcp_memoryrouter.vault.store.postgres import PostgresStore, vectors
from tests import pg
from tests.store.test_postgres import DIM, raw, unit

pytestmark = pytest.mark.postgres
ROWS = 300
EXACT_MAX = 50  # a search over more rows than this wants the index


@pytest.fixture
def url(postgres_databases: pg.Databases) -> Iterator[str]:
    database = postgres_databases.create()
    yield database
    postgres_databases.release(database)


def filled(url: str) -> tuple[PostgresStore, npt.NDArray[np.float32]]:
    store = PostgresStore(url, pool_min=0, pool_max=4, exact_max=EXACT_MAX)
    store.create_vault("v", "vr_v", 0)
    store.ingest("v", raw(ROWS), "m")
    pending = store.take_embed_batch("m", 1000)
    found = unit(np.random.default_rng(5), len(pending))
    store.put_vectors("m", pending, found)
    return store, found


def index_state(url: str) -> bool | None:
    with psycopg.connect(url) as conn:
        return vectors.index_state(conn, "m", DIM)


def broad(store: PostgresStore, query: npt.NDArray[np.float32]) -> list[ScoredMemory]:
    return store.search_vectors("v", VectorQuery("m", DIM, query), 10, SearchFilter())


def assert_exact(hits: list[ScoredMemory], found: npt.NDArray[np.float32], q: object) -> None:
    query = np.asarray(q, dtype=np.float32)
    best = sorted((float(v @ query) for v in found), reverse=True)[:10]
    assert [h.score for h in hits] == pytest.approx(best, abs=1e-5)


def test_a_search_does_not_wait_for_the_index_and_scores_exactly(url: str) -> None:
    store, found = filled(url)
    query = unit(np.random.default_rng(6), 1)[0]
    with psycopg.connect(url) as holder:
        # A lock every CREATE INDEX waits for and a search does not: SHARE UPDATE EXCLUSIVE.
        holder.execute("LOCK TABLE vectors IN SHARE UPDATE EXCLUSIVE MODE")
        answered: list[list[ScoredMemory]] = []
        search = threading.Thread(target=lambda: answered.append(broad(store, query)))
        search.start()
        search.join(20)
        ran_while_locked = bool(answered)
        holder.rollback()
    search.join()
    assert ran_while_locked, "the search waited for the index to be built"
    assert_exact(answered[0], found, query)  # broad, over 300 rows, scored exactly
    store.close()  # waits for the background build the search asked for


def test_the_builder_makes_a_valid_index_that_later_searches_use(url: str) -> None:
    store, _ = filled(url)
    assert index_state(url) is None
    store.warm([("m", DIM)])
    assert index_state(url) is True
    query = unit(np.random.default_rng(7), 1)[0]
    hits = broad(store, query)
    assert len(hits) == 10
    with psycopg.connect(url) as conn:
        name = vectors.index_name("m", DIM)
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            conn.execute(f"SET {setting} = off")  # as the search's broad path sets them
        plan = conn.execute(
            sql.SQL(
                "EXPLAIN SELECT seq FROM vectors WHERE model = 'm' ORDER BY vec::vector({}) "
                "<=> {}::vector({}) LIMIT 10"
            ).format(sql.Literal(DIM), sql.Literal(vectors.vector_literal(query)), sql.Literal(DIM))
        ).fetchall()
    assert name in "\n".join(r[0] for r in plan)
    assert_approximate(store)
    store.close()


def assert_approximate(store: PostgresStore) -> None:
    assert ("m", DIM) in store._indexed  # the search took the approximate path


def test_an_invalid_index_left_by_a_crashed_build_is_rebuilt(url: str) -> None:
    store, _ = filled(url)
    store.warm([("m", DIM)])
    name = vectors.index_name("m", DIM)
    with psycopg.connect(url, autocommit=True) as conn:
        # What a build killed half way leaves behind: the index, marked not valid.
        conn.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", (name,)
        )
    assert index_state(url) is False
    fresh = PostgresStore(url, pool_min=0, pool_max=2, exact_max=EXACT_MAX)
    query = unit(np.random.default_rng(8), 1)[0]
    broad(fresh, query)  # scores exactly and asks for the rebuild
    fresh.close()  # waits for it
    assert index_state(url) is True
    store.close()


def test_a_second_builder_skips_while_one_builds(url: str) -> None:
    """A build under way (here one waiting for a writer's open transaction, as a concurrent
    build does) is left alone: not dropped as invalid, not started twice."""
    store, _ = filled(url)
    name = vectors.index_name("m", DIM)
    statement = sql.SQL(
        "CREATE INDEX CONCURRENTLY {} ON vectors USING hnsw ((vec::vector({})) "
        "vector_cosine_ops) WITH (m = 16, ef_construction = 64) WHERE model = 'm'"
    ).format(sql.Identifier(name), sql.Literal(DIM))
    with psycopg.connect(url) as writer, psycopg.connect(url, autocommit=True) as other:
        writer.execute("LOCK TABLE vectors IN ROW EXCLUSIVE MODE")  # an open write
        first = threading.Thread(target=other.execute, args=(statement,))
        first.start()
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                while not vectors.building(conn, name):
                    assert first.is_alive()
                assert index_state(url) is False  # under way: not valid yet
                assert store.build_vector_index("m", DIM) is False
                assert vectors.building(conn, name)  # still the first build's
                query = unit(np.random.default_rng(9), 1)[0]
                broad(store, query)  # scored exactly; one attempt to build, which skips
                tried = store._builds[("m", DIM)]
                tried.join(10)
                broad(store, query)  # within the retry interval: no second attempt
                assert store._builds[("m", DIM)] is tried
        finally:  # the first build goes on and ends, whatever was asserted
            writer.rollback()
            first.join(30)
    assert index_state(url) is True
    assert store.build_vector_index("m", DIM) is True  # valid: nothing to do
    store.close()
