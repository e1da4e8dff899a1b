"""Lexical search on PostgreSQL is BM25 over postings, as the SQLite store ranks: with the
store's k1 and b, each vault's own statistics, and FTS5's expression, the rows and scores are
those of the in-memory index (``search/lexical.py``) fed the lexemes PostgreSQL's ``tsv``
holds. The postings and each vault's length stay in step with its memories through ingest,
reflections, deletes and wipes, and the migration that introduces them fills them from the
memories already stored."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from mcp_memoryrouter.vault.rules.domain import SearchFilter
from mcp_memoryrouter.vault.search.lexical import BM25, LexicalDoc, LexicalIndex
from mcp_memoryrouter.vault.search.ranking import query_terms
from mcp_memoryrouter.vault.search.rowtable import IndexRow
from mcp_memoryrouter.vault.store.postgres import PostgresStore
from mcp_memoryrouter.vault.store.postgres.lexical import TEXT_SEARCH
from mcp_memoryrouter.vault.store.postgres.schema import migrate
from tests import pg
from tests.support.store import FILTERS, VOCABULARY, Vaults

pytestmark = pytest.mark.postgres

# Every posting, and every vault's length, as the memories' tsv says they should be.
_EXPECTED_POSTINGS = (
    "SELECT m.vault_id, u.lexeme, m.seq, cardinality(u.positions), "
    "(SELECT sum(cardinality(x.positions)) FROM unnest(m.tsv) x)::int "
    "FROM memories m, unnest(m.tsv) u"
)
_POSTINGS = "SELECT vault_id, lexeme, seq, tf, dl FROM postings"
_EXPECTED_LENGTHS = (
    "SELECT v.id, coalesce((SELECT sum(cardinality(u.positions)) FROM memories m, "
    "unnest(m.tsv) u WHERE m.vault_id = v.id), 0)::bigint FROM vaults v"
)
_LENGTHS = "SELECT id, lexemes FROM vaults"


@pytest.fixture
def pg_url(postgres_databases: pg.Databases) -> Iterator[str]:
    url = postgres_databases.create()
    yield url
    postgres_databases.release(url)


def assert_postings_in_step(url: str) -> None:
    with psycopg.connect(url) as conn:
        postings = Counter(conn.execute(_POSTINGS).fetchall())
        assert postings == Counter(conn.execute(_EXPECTED_POSTINGS).fetchall())
        assert dict(conn.execute(_LENGTHS).fetchall()) == dict(
            conn.execute(_EXPECTED_LENGTHS).fetchall()
        )


def reference_index(url: str) -> LexicalIndex:
    """The SQLite store's BM25 index over PostgreSQL's own lexemes of every memory."""
    index = LexicalIndex(BM25)
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT m.seq, m.vault_id, m.tier, m.importance, m.date_from, m.date_to, "
            "m.session_id, coalesce((SELECT array_agg(u.lexeme) FROM unnest(m.tsv) u), '{}'), "
            "coalesce((SELECT array_agg(cardinality(u.positions)) FROM unnest(m.tsv) u), '{}') "
            "FROM memories m ORDER BY m.seq"
        ).fetchall()
    index.add(LexicalDoc(IndexRow(*r[:7]), dict(zip(r[7], r[8], strict=True))) for r in rows)
    return index


def lexemes_of(url: str, words: list[str]) -> list[str]:
    with psycopg.connect(url) as conn:
        return [
            lexeme
            for word in words
            for (lexeme,) in conn.execute(
                "SELECT lexeme FROM unnest(to_tsvector(%s, %s))", (TEXT_SEARCH, word)
            ).fetchall()
        ]


def assert_ranks_as_the_index(
    data: Vaults, url: str, rng: random.Random, vaults: list[str]
) -> None:
    store, index = data.store, reference_index(url)
    for _ in range(25):
        vault = rng.choice(vaults)
        words = query_terms(" ".join(rng.sample(VOCABULARY, rng.randint(1, 4))))
        where = rng.choice(FILTERS)
        expected = index.search(vault, lexemes_of(url, words), 1_000, where)
        found = store.search_lexical(vault, words, 1_000, where)
        # the same rows in the same order, scores equal but for the order of a sum's terms
        assert [h.memory.seq for h in found] == [seq for seq, _ in expected], (words, where)
        assert [h.score for h in found] == pytest.approx([s for _, s in expected], rel=1e-12)
        assert {data.owner[h.memory.id] for h in found} <= {vault}
        limit = rng.choice([1, 5, 10])  # a short page: the best ones, scored alike
        page = store.search_lexical(vault, words, limit, where)
        assert [h.score for h in page] == pytest.approx([s for _, s in expected[:limit]], rel=1e-12)


@pytest.mark.parametrize("seed", [1, 2])
def test_postgres_ranks_with_bm25_over_each_vaults_own_statistics(pg_url: str, seed: int) -> None:
    rng = random.Random(seed)
    store = PostgresStore(pg_url, pool_min=0, pool_max=2)
    try:
        data = Vaults(store, seed)  # type: ignore[arg-type]  # the store contract is shared
        for vault in ("a", "b", "c"):
            store.create_vault(vault, f"ref-{vault}", 0)
        ids = {vault: data.raw(vault, 120) for vault in ("a", "b", "c")}
        insights = data.reflections("a", 2, ids["a"][:30])
        assert_postings_in_step(pg_url)
        assert_ranks_as_the_index(data, pg_url, rng, ["a", "b", "c"])

        data.reflections("a", 3, insights)
        ids["a"] += data.raw("a", 60)
        store.delete_ids("a", rng.sample(ids["a"], 70))  # deletes change every statistic
        store.wipe("c")
        assert_postings_in_step(pg_url)
        assert_ranks_as_the_index(data, pg_url, rng, ["a", "b", "c"])
    finally:
        store.close()


def test_a_word_two_query_words_share_counts_twice(pg_url: str) -> None:
    store = PostgresStore(pg_url, pool_min=0, pool_max=2)
    try:
        data = Vaults(store, 7)  # type: ignore[arg-type]
        store.create_vault("a", "ref-a", 0)
        data.raw("a", 80)
        index = reference_index(pg_url)
        words = ["runs", "running", "kiwi"]  # "runs" and "running" are both "run"
        assert lexemes_of(pg_url, words) == ["run", "run", "kiwi"]
        expected = index.search("a", ["run", "run", "kiwi"], 1_000, SearchFilter())
        found = store.search_lexical("a", words, 1_000, SearchFilter())
        assert [h.memory.seq for h in found] == [seq for seq, _ in expected]
        assert [h.score for h in found] == pytest.approx([s for _, s in expected], rel=1e-12)
    finally:
        store.close()


def test_the_migration_fills_postings_from_the_memories_already_stored(
    postgres_databases: pg.Databases,
) -> None:
    name = "mr_bm25_upgrade"
    admin = postgres_databases.admin_url
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = pg.with_database(admin, name)
    try:
        assert migrate(url, until=4) == 4
        with psycopg.connect(url) as conn:
            conn.execute("INSERT INTO vaults (id, ref, created_ms, n1) VALUES ('a', 'ref-a', 0, 3)")
            for i, text in enumerate(["kiwi and pear", "the kiwi, the kiwi", "running late"]):
                conn.execute(
                    "INSERT INTO memories (id, vault_id, tier, content, tokens, date_from, "
                    "date_to, created_ms) VALUES (%s, 'a', 1, %s, 3, %s, %s, 0)",
                    (f"m{i}", text, i, i),
                )
        assert migrate(url) >= 5
        assert_postings_in_step(url)
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT lexemes FROM vaults").fetchone() == (9,)
        store = PostgresStore(url, pool_min=0, pool_max=2)
        try:
            found = store.search_lexical("a", ["kiwi"], 10, SearchFilter())
            assert [h.memory.id for h in found] == ["m1", "m0"]  # two kiwis in a short memory
        finally:
            store.close()
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(drop)
