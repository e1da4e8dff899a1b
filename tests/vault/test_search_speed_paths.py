"""The fast search paths: the in-memory lexical index (with FTS5's parameters) and vector rows
fetched by key answer exactly what the plain filtered queries answer; the search of a
large vector index (int8 rows, inverted lists) scores within the int8 bound and honours
deletes and filters."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from mcp_memoryrouter.vault.rules.domain import NewRaw, SearchFilter
from mcp_memoryrouter.vault.search.compact import quantisation_bound, quantise
from mcp_memoryrouter.vault.search.lexical import FTS5_BM25
from mcp_memoryrouter.vault.search.rowtable import IndexRow
from mcp_memoryrouter.vault.search.vectors import VectorIndex, VectorQuery
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support.store import fts5_ranking

WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "grape"]
DAY_MS = 86_400_000
MODEL = "test-model"
DIM = 8


def add(store: SQLiteStore, vault_id: str, texts: list[str], seed: int = 0) -> None:
    rng = random.Random(seed)
    rows = [
        NewRaw(
            f"{vault_id}-{seed}-{i}",
            "user",
            text,
            len(text.split()),
            rng.randrange(30) * DAY_MS,
            rng.choice([None, "s1", "s2"]),
            f"{vault_id}-{seed}-{i}",
            0,
        )
        for i, text in enumerate(texts)
    ]
    store.ingest(vault_id, rows, MODEL)


def new_vault(store: SQLiteStore, name: str) -> str:
    store.create_vault(name, f"ref-{name}", 0)
    return name


def sentences(rng: random.Random, count: int, vocabulary: list[str]) -> list[str]:
    return [" ".join(rng.choices(vocabulary, k=rng.randint(1, 4))) for _ in range(count)]


FILTERS = [
    SearchFilter(),
    SearchFilter(tiers=(1,)),
    SearchFilter(tiers=(2, 3)),
    SearchFilter(session_id="s1"),
    SearchFilter(window=(5 * DAY_MS, 9 * DAY_MS)),
]


@pytest.mark.parametrize("where", FILTERS, ids=["none", "raw", "reflections", "session", "window"])
def test_lexical_search_returns_exactly_the_filtered_query_rows_in_rank_then_seq_order(
    tmp_path: Path, where: SearchFilter
) -> None:
    store = SQLiteStore(tmp_path / "vault.sqlite3", bm25=FTS5_BM25)  # FTS5's parameters
    rng = random.Random(7)
    mine, other = new_vault(store, "mine"), new_vault(store, "other")
    add(store, mine, sentences(rng, 300, WORDS), seed=1)
    add(store, other, sentences(rng, 500, WORDS), seed=2)  # mine holds 3/8 of the index
    for _ in range(40):
        words = rng.sample(WORDS, rng.randint(1, 3))
        limit = rng.choice([1, 3, 10, 40, 150])
        found = store.search_lexical(mine, words, limit, where)
        assert [(h.memory.seq, h.score) for h in found] == fts5_ranking(
            store, mine, words, limit, where
        )
        assert all(h.memory.id.startswith("mine-") for h in found)
    store.close()


def test_a_vault_whose_matches_rank_below_another_vaults_still_gets_all_of_them(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "vault.sqlite3")
    mine, other = new_vault(store, "mine"), new_vault(store, "other")
    add(store, other, ["kiwi"] * 150, seed=1)  # short rows: the best BM25 scores of the index
    add(store, mine, ["kiwi " + " ".join(WORDS * 3)] * 5 + ["pear"] * 60, seed=2)
    found = store.search_lexical(mine, ["kiwi"], 10, SearchFilter())
    assert [h.memory.id for h in found] == [f"mine-2-{i}" for i in range(5)]
    store.close()


def test_deleted_rows_are_never_returned_by_either_search_path(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "vault.sqlite3")
    mine = new_vault(store, "mine")
    add(store, mine, ["fig"] * 10 + ["fig plum"] * 10, seed=1)
    vectorise(store)
    gone = [f"mine-1-{i}" for i in range(0, 20, 2)]
    store.delete_ids(mine, gone)
    lexical = store.search_lexical(mine, ["fig"], 20, SearchFilter())
    dense = store.search_vectors(mine, VectorQuery(MODEL, DIM, unit(0)), 20, SearchFilter())
    assert len(lexical) == len(dense) == 10
    assert not {h.memory.id for h in [*lexical, *dense]} & set(gone)
    store.close()


def unit(seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    result: np.ndarray = vector / np.linalg.norm(vector)
    return result


def vectorise(store: SQLiteStore) -> None:
    while pending := store.take_embed_batch(MODEL, 500):
        store.put_vectors(MODEL, pending, np.stack([unit(p.row.seq) for p in pending]))


def vm_steps(store: SQLiteStore, call: Callable[[], object]) -> int:
    """SQLite virtual-machine steps (in hundreds) the calling thread's reads take in ``call``."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    with store._reader_conn() as conn:  # this thread's reader, which ``call`` reuses
        conn.set_progress_handler(count, 100)
    try:
        call()
    finally:
        with store._reader_conn() as conn:
            conn.set_progress_handler(None, 0)
    return steps[0]


def test_fetching_vector_hits_costs_the_same_in_a_small_and_a_large_vault(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "vault.sqlite3")
    small, large = new_vault(store, "small"), new_vault(store, "large")
    add(store, small, [f"row {i}" for i in range(200)], seed=1)
    add(store, large, [f"row {i}" for i in range(5000)], seed=2)
    vectorise(store)
    store.search_vectors(
        small, VectorQuery(MODEL, DIM, unit(0)), 1, SearchFilter()
    )  # loads the index
    search = partial(store.search_vectors, query=VectorQuery(MODEL, DIM, unit(0)), k=150)
    costs = {  # 150 hits: the candidate depth of a search
        vault: vm_steps(store, partial(search, vault, where=SearchFilter()))
        for vault in (small, large)
    }
    assert costs[large] <= 2 * costs[small] + 5  # not a walk over the large vault's rows
    store.close()


def clustered(count: int, seed: int, dim: int = 64) -> npt.NDArray[np.float32]:
    """Unit vectors near an 8-dimensional subspace, as text embeddings are near a few."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((count, 8)) @ np.random.default_rng(0).standard_normal((8, dim))
    vectors = (base + 0.3 * rng.standard_normal((count, dim))).astype(np.float32)
    result: npt.NDArray[np.float32] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return result


def rows_of(vault: str, first: int, count: int, tier: int = 1) -> list[IndexRow]:
    return [IndexRow(first + i, vault, tier, None, 0, 0, None) for i in range(count)]


def test_a_large_index_scores_int8_rows_within_their_bound_of_the_exact_cosines() -> None:
    vectors = clustered(3000, seed=1)
    large, exact = VectorIndex(64, approximate_from=1000, exact_max=200), VectorIndex(64, 10**9)
    for index in (large, exact):
        index.add(rows_of("v", 1, 3000), vectors)
    large.warm()
    assert large.compact and large.fitted and not exact.compact
    for n in range(20):
        query = vectors[n * 100]
        found = large.search("v", query, 10, SearchFilter())
        assert found[0][0] == n * 100 + 1  # the row itself comes first
        for seq, score in found:
            _, scales = quantise(vectors[seq - 1 : seq])
            bound = float(quantisation_bound(scales, query)[0])
            assert abs(score - float(vectors[seq - 1] @ query)) <= bound
        best = {seq for seq, _ in exact.search("v", query, 10, SearchFilter())}
        assert len(best & {seq for seq, _ in found}) >= 9


def test_the_lists_never_return_deleted_filtered_or_other_vault_rows() -> None:
    vectors = clustered(3000, seed=2)
    index = VectorIndex(64, approximate_from=1000, exact_max=100)
    index.add(rows_of("mine", 1, 2000) + rows_of("other", 2001, 1000), vectors)
    index.add(rows_of("mine", 3001, 500, tier=2), clustered(500, seed=3))
    index.warm()
    query = vectors[10]
    assert index.search("mine", query, 5, SearchFilter())[0][0] == 11
    index.remove([11])
    found = index.search("mine", query, 50, SearchFilter(tiers=(1,)))
    assert found and all(1 <= seq <= 2000 and seq != 11 for seq, _ in found)
    index.remove_vault("mine")
    assert index.search("mine", query, 5, SearchFilter()) == []


def test_rows_stored_after_the_lists_were_fitted_are_found() -> None:
    index = VectorIndex(64, approximate_from=1000, exact_max=100)
    index.add(rows_of("v", 1, 2000), clustered(2000, seed=4))
    index.warm()
    fresh = clustered(1, seed=5)
    assert all(seq != 5000 for seq, _ in index.search("v", fresh[0], 10, SearchFilter()))
    index.add(rows_of("v", 5000, 1), fresh)
    assert index.search("v", fresh[0], 10, SearchFilter())[0][0] == 5000


def test_warming_fits_lists_only_for_a_large_index() -> None:
    small, large = VectorIndex(64, approximate_from=1000), VectorIndex(64, approximate_from=1000)
    small.add(rows_of("v", 1, 500), clustered(500, seed=6))
    large.add(rows_of("v", 1, 2000), clustered(2000, seed=7))
    small.warm()
    large.warm()
    assert not small.fitted and not small.compact  # float32, exact scans: nothing to fit
    assert large.fitted and large.compact  # fitted before any search
