"""The vector index at scale: int8 rows within their bound, inverted lists with recall of
0.95 at k = 150 that fall back to an exact scan where a search has few survivors, fitting
in a thread of its own, and the index saved beside the database read back (with the
vectors stored since) as a fresh load would build it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from mcp_memoryrouter.vault.rules.domain import NewRaw, SearchFilter
from mcp_memoryrouter.vault.search import snapshot
from mcp_memoryrouter.vault.search.compact import dequantise, quantisation_bound, quantise
from mcp_memoryrouter.vault.search.rowtable import IndexRow
from mcp_memoryrouter.vault.search.vectors import Saved, VectorIndex, VectorQuery
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from mcp_memoryrouter.vault.store.sqlite import vectors as sqlite_vectors

Floats = npt.NDArray[np.float32]
K = 150


def topics(count: int, seed: int, dim: int = 48, centres: int = 60) -> Floats:
    """Unit rows around random centres, one or two a row (text embeddings cluster by topic
    and mix topics)."""
    rng = np.random.default_rng(seed)
    centre = np.random.default_rng(0).standard_normal((centres, dim))
    first, second = rng.integers(centres, size=count), rng.integers(centres, size=count)
    share = rng.random((count, 1)) * 0.5
    rows = (1 - share) * centre[first] + share * centre[second]
    rows += 0.6 * rng.standard_normal((count, dim))
    result: Floats = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return result


def rows_of(vaults: list[str], first: int = 1) -> list[IndexRow]:
    return [IndexRow(first + i, v, 1, None, 0, 0, None) for i, v in enumerate(vaults)]


def exact_best(vectors: Floats, members: npt.NDArray[np.intp], query: Floats, k: int) -> set[int]:
    scores = vectors[members] @ query
    return {int(members[i]) + 1 for i in np.argpartition(-scores, k - 1)[:k]}


def test_int8_rows_round_trip_within_half_a_step_and_cosines_within_their_bound() -> None:
    vectors = topics(2000, seed=1, dim=384)
    codes, scales = quantise(vectors)
    assert codes.dtype == np.int8 and scales.dtype == np.float32
    back = dequantise(codes, scales)
    assert np.all(np.abs(back - vectors) <= scales[:, None] / 2 + 1e-7)
    query = vectors[0]
    error = np.abs(back @ query - vectors @ query)
    assert np.all(error <= quantisation_bound(scales, query) + 1e-6)
    assert float(np.median(error)) < 1e-3  # cosines typically within 0.001 at 384 dimensions
    zero = np.zeros((1, 8), dtype=np.float32)
    assert not dequantise(*quantise(zero)).any()  # a zero row stays zero, no division by 0


def test_the_lists_find_95_percent_of_the_exact_150_best_reading_a_fraction_of_rows() -> None:
    vectors = topics(30_000, seed=2)
    index = VectorIndex(48, approximate_from=1000, exact_max=1000)
    index.add(rows_of(["v"] * len(vectors)), vectors)
    index.warm()
    queries = topics(40, seed=3)
    members = np.arange(len(vectors))
    recalls = []
    for query in queries:
        found = {seq for seq, _ in index.search("v", query, K, SearchFilter())}
        recalls.append(len(found & exact_best(vectors, members, query, K)) / K)
    assert np.mean(recalls) >= 0.95
    assert index._wanted(K) <= len(vectors) // 4  # entries read: an approximate search


def test_a_selective_filter_and_a_small_vault_are_scanned_exactly() -> None:
    vectors = topics(12_000, seed=4)
    vaults = ["big"] * 11_000 + ["small"] * 1000
    index = VectorIndex(48, approximate_from=1000, exact_max=1500)
    index.add(rows_of(vaults), vectors)
    index.add([IndexRow(20_000 + i, "big", 2, None, 0, 0, None) for i in range(500)], vectors[:500])
    index.warm()
    assert index.fitted
    compact = dequantise(*quantise(vectors))  # what the index holds
    small = np.arange(11_000, 12_000)
    for query in topics(10, seed=5):
        found = index.search("small", query, K, SearchFilter())
        assert {seq for seq, _ in found} == exact_best(compact, small, query, K)
        reflections = index.search("big", query, 600, SearchFilter(tiers=(2,)))
        assert {seq for seq, _ in reflections} == set(range(20_000, 20_500))  # every survivor


def test_a_growing_index_fits_its_lists_in_a_thread_and_searches_meanwhile() -> None:
    vectors = topics(6000, seed=6)
    index = VectorIndex(48, approximate_from=2000, exact_max=500)
    index.start()
    index.add(rows_of(["v"] * 1500), vectors[:1500])
    assert not index.compact  # float32 below the threshold
    fitted: list[bool] = []
    index.on_fitted = lambda: fitted.append(True)
    index.add(rows_of(["v"] * 1500, first=1501), vectors[1500:3000])
    assert index.compact  # int8 from the threshold on
    assert index.search("v", vectors[2999], 1, SearchFilter())[0][0] == 3000
    index.wait()
    assert index.fitted and fitted == [True]
    index.add(rows_of(["v"] * 3000, first=3001), vectors[3000:])  # doubled: fitted again
    index.wait()
    assert fitted == [True, True]
    assert index.search("v", vectors[5999], 1, SearchFilter())[0][0] == 6000


def test_deleted_rows_and_vaults_leave_the_lists() -> None:
    vectors = topics(4000, seed=7)
    index = VectorIndex(48, approximate_from=1000, exact_max=100)
    index.add(rows_of(["a"] * 3000 + ["b"] * 1000), vectors)
    index.warm()
    index.remove([1, 2, 3])
    found = {seq for seq, _ in index.search("a", vectors[0], 300, SearchFilter())}
    assert found and not found & {1, 2, 3}
    index.remove_vault("b")
    assert index.search("b", vectors[3500], 10, SearchFilter()) == []
    assert len(index) == 2997
    index.add(rows_of(["a", "a"], first=10), vectors[:2])  # seq 10 twice: the last vector stays
    index.remove([10])
    found = {seq for seq, _ in index.search("a", vectors[1], 3000, SearchFilter())}
    assert 10 not in found and len(found) == 2996


def test_an_index_saved_with_rows_added_and_deleted_since_its_fit_reads_back_the_same(
    tmp_path: Path,
) -> None:
    vectors = topics(4000, seed=8)
    index = VectorIndex(48, approximate_from=1000, exact_max=100)
    index.add(rows_of(["a"] * 3000), vectors[:3000])
    index.warm()
    index.add(rows_of(["a"] * 500 + ["b"] * 500, first=3001), vectors[3000:])  # the lists' tail
    index.remove([2, 3002])
    read = index.state()
    assert read is not None
    snapshot.write(tmp_path / "saved", read(), {"note": "kept"})
    saved, meta = snapshot.read(tmp_path / "saved", room=10)
    restored = VectorIndex.restored(saved, exact_max=100)
    assert meta == {"note": "kept"} and len(restored) == len(index) == 3998
    for query in topics(10, seed=9):
        for vault in ("a", "b"):
            assert restored.search(vault, query, 50, SearchFilter()) == index.search(
                vault, query, 50, SearchFilter()
            )
    restored.add(rows_of(["b"] * 20, first=5001), vectors[:20])  # into the room, then beyond
    assert restored.search("b", vectors[0], 1, SearchFilter())[0][0] == 5001


# --- saved beside the database ---------------------------------------------------------

MODEL, DIM = "test-model", 8
DAY_MS = 86_400_000


def store_rows(store: SQLiteStore, vault: str, first: int, count: int) -> None:
    rows = [
        NewRaw(f"{vault}-{i}", "user", f"line {i}", 2, (i % 30) * DAY_MS, None, f"{vault}-{i}", 0)
        for i in range(first, first + count)
    ]
    store.ingest(vault, rows, MODEL)
    rng = np.random.default_rng(first)
    while pending := store.take_embed_batch(MODEL, 2000):
        found = rng.standard_normal((len(pending), DIM)).astype(np.float32)
        store.put_vectors(MODEL, pending, found / np.linalg.norm(found, axis=1, keepdims=True))


def held(index: VectorIndex) -> dict[int, tuple[str, int, bytes]]:
    """Each row's seq -> vault, date and int8 vector: what an index holds, in any order."""
    index.warm()
    read = index.state()
    assert read is not None
    saved: Saved = read()
    vaults = saved.columns["vault"].tolist()
    return {
        int(seq): (
            saved.strings[vaults[p]],
            int(saved.columns["date_from"][p]),
            saved.codes[p].tobytes(),
        )
        for p, seq in enumerate(saved.columns["seq"].tolist())
    }


def saved_large_index(database: Path, rows: int) -> tuple[SQLiteStore, Path, VectorQuery]:
    """A serving store over a vault of ``rows`` memories whose index was loaded by a search,
    fitted and saved beside the database: the store, the saved file, the query used."""
    saved = sqlite_vectors.snapshot_path(str(database), MODEL)
    store = SQLiteStore(database, serving=True)
    store.create_vault("v", "ref-v", 0)
    store_rows(store, "v", 0, rows)
    query = VectorQuery(MODEL, DIM, np.eye(DIM, dtype=np.float32)[0])
    store.search_vectors("v", query, 5, SearchFilter())  # loads; a large index fits and saves
    store._indexes[MODEL].wait()
    assert saved.exists() and saved.stat().st_mode & 0o077 == 0  # owner-only
    return store, saved, query


def fresh_load(database: Path) -> VectorIndex:
    store = SQLiteStore(database)
    try:
        with store._reader_conn() as conn:
            return sqlite_vectors.load_index(conn, MODEL, DIM)
    finally:
        store.close()


def test_a_saved_index_and_the_vectors_stored_since_load_as_a_fresh_load_would(
    tmp_path: Path,
) -> None:
    database = tmp_path / "vault.sqlite3"
    store, saved, _ = saved_large_index(database, 20_500)
    store.close()
    other = SQLiteStore(database)  # not serving: its writes leave the file alone
    store_rows(other, "v", 20_500, 700)
    other.close()
    store = SQLiteStore(database, serving=True)
    with store._reader_conn() as conn:
        caught_up = sqlite_vectors.load_index(conn, MODEL, DIM, saved)
    store.close()
    assert len(caught_up) == 21_200 and caught_up.fitted  # read from the file, not fitted anew
    assert held(caught_up) == held(fresh_load(database))
    with saved.open("r+b") as f:  # cut short (a full disk, say): refused, read from SQLite
        f.truncate(saved.stat().st_size // 2)
    with pytest.raises(ValueError, match="cut short"):
        snapshot.read(saved)
    store = SQLiteStore(database, serving=True)
    with store._reader_conn() as conn:
        reloaded = sqlite_vectors.load_index(conn, MODEL, DIM, saved)
    store.close()
    assert len(reloaded) == 21_200 and not reloaded.fitted


def test_a_delete_removes_the_saved_index_so_a_reused_seq_cannot_bring_a_vector_back(
    tmp_path: Path,
) -> None:
    database = tmp_path / "vault.sqlite3"
    store, saved, query = saved_large_index(database, 20_100)
    store.delete_ids("v", ["v-20099", "v-5"])
    assert not saved.exists()
    found = store.search_vectors("v", query, 20_100, SearchFilter())
    assert {h.memory.id for h in found}.isdisjoint({"v-20099", "v-5"}) and len(found) == 20_098
    store.close()  # saves the index again, without them
    assert saved.exists()
    store = SQLiteStore(database, serving=True)
    store_rows(store, "v", 20_099, 1)  # the deleted last seq, given to a new memory
    with store._reader_conn() as conn:
        loaded = sqlite_vectors.load_index(conn, MODEL, DIM, saved)
    store.close()
    assert loaded.fitted and len(loaded) == 20_099
    assert held(loaded) == held(fresh_load(database))


def test_replacing_another_model_keeps_this_models_saved_index(tmp_path: Path) -> None:
    """Every start asks to replace the local model's earlier forms; that must not throw
    away the saved index of a model that stays (a million rows refitted at each start)."""
    store, saved, _ = saved_large_index(tmp_path / "vault.sqlite3", 20_100)
    store.replace_model("an-earlier-model", "its-successor")
    assert saved.exists()
    store.replace_model(MODEL, "its-successor")
    assert not saved.exists()
    store.close()
