"""The SQLite store's in-memory BM25 index: with FTS5's parameters it answers exactly what
FTS5's ``bm25()`` answers (same rows, same scores, same order) through loads, inserts,
deletes, wipes, rollbacks, reused seqs and compaction; the store ranks with its own k1 and b;
and FTS5 never scores on the search path."""

from __future__ import annotations

import math
import random
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from mcp_memoryrouter.vault.indexer import EmbeddingWorker
from mcp_memoryrouter.vault.rules.domain import NewRaw, SearchFilter
from mcp_memoryrouter.vault.search import lexical
from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.search.lexical import BM25, FTS5_BM25
from mcp_memoryrouter.vault.search.ranking import query_terms
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from mcp_memoryrouter.vault.store.sqlite import lexical as sqlite_lexical
from tests.support.store import FILTERS, VOCABULARY, Vaults, fts5_ranking


def assert_same_as_fts(data: Vaults, rng: random.Random, vaults: list[str]) -> None:
    store = data.store
    for _ in range(25):
        vault = rng.choice(vaults)
        words = query_terms(" ".join(rng.sample(VOCABULARY, rng.randint(1, 4))))
        limit = rng.choice([1, 5, 10, 150])
        where = rng.choice(FILTERS)
        found = store.search_lexical(vault, words, limit, where)
        assert [(h.memory.seq, h.score) for h in found] == fts5_ranking(
            store, vault, words, limit, where
        ), (words, where)
        assert {data.owner[h.memory.id] for h in found} <= {vault}


@pytest.mark.parametrize("merge_from", [lexical._MERGE_FROM, 100])  # 100: tails merge often
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_index_ranks_exactly_as_fts5_through_every_kind_of_change(
    tmp_path: Path, seed: int, merge_from: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lexical, "_MERGE_FROM", merge_from)
    path, rng = tmp_path / "vault.sqlite3", random.Random(seed)
    store = SQLiteStore(path, bm25=FTS5_BM25)
    data = Vaults(store, seed)
    for vault in ("a", "b", "c"):
        store.create_vault(vault, f"ref-{vault}", 0)
    ids = {vault: data.raw(vault, 120) for vault in ("a", "b", "c")}
    insights = data.reflections("a", 2, ids["a"][:30])
    assert_same_as_fts(data, rng, ["a", "b", "c"])  # loaded from the on-disk index

    ids["a"] += data.raw("a", 60)  # inserts after the load
    data.reflections("a", 3, insights)
    data.reflections("b", 2, ids["b"][:10])
    assert_same_as_fts(data, rng, ["a", "b", "c"])

    store.delete_ids("a", rng.sample(ids["a"], 70))  # deletes change every statistic
    store.wipe("c")
    assert_same_as_fts(data, rng, ["a", "b", "c"])
    assert store.search_lexical("c", ["apple", "pear", "fig"], 10, SearchFilter()) == []

    data.raw("c", 40)  # a wiped vault fills again
    store.close()
    store = data.store = SQLiteStore(path, bm25=FTS5_BM25)  # a restart loads what is on disk
    assert_same_as_fts(data, rng, ["a", "b", "c"])
    store.close()


def test_the_lexical_path_never_asks_fts5_to_score(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "vault.sqlite3")
    store.create_vault("a", "ref-a", 0)
    Vaults(store, 1).raw("a", 200)
    statements: list[str] = []
    with store._reader_conn() as conn:  # this thread's reader, which the search reuses
        conn.set_trace_callback(statements.append)
    assert store.search_lexical("a", ["apple", "kiwi"], 10, SearchFilter())
    assert statements
    assert not [s for s in statements if "bm25(" in s or "MATCH" in s]
    store.close()


def test_a_word_fts5_splits_counts_as_its_tokens(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "vault.sqlite3")
    store.create_vault("a", "ref-a", 0)
    rows = [
        NewRaw(f"a-{i}", "user", text, 2, 0, None, f"a-{i}", 0)
        for i, text in enumerate(["pear", "kiwi pear", "plum"])
    ]
    store.ingest("a", rows, None)
    found = store.search_lexical("a", ["pear_kiwi"], 10, SearchFilter())  # \w+ keeps "_"
    assert [h.memory.id for h in found] == ["a-1", "a-0"]
    store.close()


def test_the_store_ranks_with_its_own_k1_and_b(tmp_path: Path) -> None:
    """Two memories hold "kiwi" once, a short one and a long one: each scores BM25 with the
    store's k1 and b, which FTS5's would not give."""
    store = SQLiteStore(tmp_path / "vault.sqlite3")
    store.create_vault("a", "ref-a", 0)
    texts = ["kiwi", "kiwi " + "plum " * 15, "pear", "fig", "lime"]
    rows = [NewRaw(f"a-{i}", "user", t, 2, 0, None, f"a-{i}", 0) for i, t in enumerate(texts)]
    store.ingest("a", rows, None)
    with store._reader_conn() as conn:
        stored = conn.execute("SELECT content, dated FROM memories ORDER BY seq").fetchall()
    sizes = [sum(c.values()) for c in store._doc_tokens.counts(stored)]  # date words count
    average = sum(sizes) / len(sizes)
    idf = math.log((5 - 2 + 0.5) / (2 + 0.5))  # 2 of 5 rows hold the word

    def bm25(k1: float, b: float, size: int) -> float:
        return idf * (1 * (k1 + 1.0)) / (1 + k1 * (1 - b + b * size / average))

    found = store.search_lexical("a", ["kiwi"], 10, SearchFilter())
    assert [h.memory.id for h in found] == ["a-0", "a-1"]
    expected = [bm25(BM25.k1, BM25.b, size) for size in sizes[:2]]
    assert [h.score for h in found] == pytest.approx(expected, rel=1e-12)
    assert expected != pytest.approx([bm25(1.2, 0.75, size) for size in sizes[:2]], rel=1e-3)
    store.close()


def test_a_rolled_back_write_leaves_the_index_untouched(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "vault.sqlite3")
    store.create_vault("a", "ref-a", 0)
    data = Vaults(store, 1)
    data.raw("a", 20)
    assert store.search_lexical("a", ["zebra"], 10, SearchFilter()) == []  # index loaded

    def failing_write() -> None:
        with store._writer_conn() as conn:
            conn.execute(
                "INSERT INTO memories (id, vault_id, tier, content, tokens, date_from, date_to, "
                "created_ms, dated) VALUES ('ghost', 'a', 1, 'zebra', 1, 0, 0, 0, '')"
            )
            raise RuntimeError("the write fails after the insert")

    with pytest.raises(RuntimeError):
        failing_write()
    data.raw("a", 1)  # the next commit applies the log
    assert store.search_lexical("a", ["zebra"], 10, SearchFilter()) == []
    assert len(store._lexical_index()) == 21
    store.close()


def test_a_reused_seq_is_indexed_with_its_new_text(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "vault.sqlite3")
    store.create_vault("a", "ref-a", 0)
    store.ingest("a", [NewRaw("a-1", "user", "kiwi", 1, 0, None, "a-1", 0)], None)
    store.ingest("a", [NewRaw("a-2", "user", "zebra", 1, 0, None, "a-2", 0)], None)
    assert [h.memory.id for h in store.search_lexical("a", ["zebra"], 5, SearchFilter())]
    store.delete_ids("a", ["a-2"])  # the largest seq: SQLite hands it out again
    store.ingest("a", [NewRaw("a-3", "user", "lion", 1, 0, None, "a-3", 0)], None)
    assert store.search_lexical("a", ["zebra"], 5, SearchFilter()) == []
    assert [h.memory.id for h in store.search_lexical("a", ["lion"], 5, SearchFilter())] == ["a-3"]
    store.close()


def test_compaction_keeps_the_ranking_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lexical, "_COMPACT_FROM", 10)
    store, rng = SQLiteStore(tmp_path / "vault.sqlite3", bm25=FTS5_BM25), random.Random(4)
    data = Vaults(store, 4)
    for vault in ("a", "b"):
        store.create_vault(vault, f"ref-{vault}", 0)
    ids = data.raw("a", 300)
    data.raw("b", 100)
    assert_same_as_fts(data, rng, ["a", "b"])
    index = store._lexical_index()
    store.delete_ids("a", ids[:250])  # more dead positions than live rows: compacts
    assert index._rows.size == len(index) == 150
    assert_same_as_fts(data, rng, ["a", "b"])
    data.raw("a", 50)
    assert_same_as_fts(data, rng, ["a", "b"])
    store.close()


def test_the_tokenizer_is_the_one_the_on_disk_index_uses(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "vault.sqlite3")
    with store._reader_conn() as conn:
        (sql,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'memories_fts'"
        ).fetchone()
    assert f"tokenize = '{sqlite_lexical.TOKENIZE}'" in sql
    store.close()


def test_the_embedding_worker_loads_the_index_before_any_search(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "vault.sqlite3")
    store.create_vault("a", "ref-a", 0)
    Vaults(store, 1).raw("a", 50)
    store.close()
    store = SQLiteStore(tmp_path / "vault.sqlite3")  # a restart: nothing loaded yet
    assert store._lexicon is None
    worker = EmbeddingWorker(store, Embedders({}, "none"))
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while store._lexicon is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store._lexicon is not None and len(store._lexicon) == 50
    finally:
        worker.stop()
        store.close()


def test_a_failed_index_update_keeps_the_write_and_reloads_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(tmp_path / "vault.sqlite3")
    store.create_vault("a", "ref-a", 0)
    store.ingest("a", [NewRaw("a-1", "user", "kiwi", 1, 0, None, "a-1", 0)], None)
    assert len(store.search_lexical("a", ["kiwi"], 5, SearchFilter())) == 1  # index loaded

    def broken(texts: object) -> list[dict[str, int]]:
        raise RuntimeError("tokenizer down")

    monkeypatch.setattr(store._doc_tokens, "counts", broken)
    ids, stored, _ = store.ingest("a", [NewRaw("a-2", "user", "kiwi", 1, 0, None, "a-2", 0)], None)
    assert (ids, stored) == (["a-2"], 1)  # the write stands
    monkeypatch.undo()
    found = store.search_lexical("a", ["kiwi"], 5, SearchFilter())
    assert sorted(h.memory.id for h in found) == ["a-1", "a-2"]
    store.close()


def _segments_mapped(store: SQLiteStore) -> bool:
    """Whether the index's postings are the saved ones, memory-mapped (read, not rebuilt),
    as plain arrays over the mapping."""
    index = store._lexical_index()
    return all(
        type(v.segment.positions) is np.ndarray and isinstance(v.segment.positions.base, np.memmap)
        for v in index._vaults.values()
    )


def test_a_restart_reads_the_saved_index_and_catches_up_with_the_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_lexical, "SNAPSHOT_FROM", 0)
    path, rng = tmp_path / "vault.sqlite3", random.Random(6)
    store = SQLiteStore(path, bm25=FTS5_BM25, serving=True)
    data = Vaults(store, 6)
    for vault in ("a", "b"):
        store.create_vault(vault, f"ref-{vault}", 0)
    ids = data.raw("a", 150) + data.raw("b", 80)
    assert_same_as_fts(data, rng, ["a", "b"])  # loaded from FTS5, then saved
    assert not _segments_mapped(store)
    store.close()
    saved = tmp_path / "vault.sqlite3.lexical"
    assert (saved.stat().st_mode & 0o777) == 0o700  # the vault's words: owner only
    assert {f.stat().st_mode & 0o777 for f in saved.iterdir()} == {0o600}

    data.store = SQLiteStore(path)  # writes the saved index does not hold
    data.raw("a", 40)
    data.store.delete_ids("a", rng.sample(ids[:150], 30))
    data.store.close()
    store = data.store = SQLiteStore(path, bm25=FTS5_BM25, serving=True)
    assert _segments_mapped(store)  # read back, then the rows added and deleted since
    assert_same_as_fts(data, rng, ["a", "b"])
    data.raw("b", 20)  # and it follows writes as before
    assert_same_as_fts(data, rng, ["a", "b"])
    store.close()  # saved again: it changed

    with closing(sqlite3.connect(path)) as conn:
        newest, vault = conn.execute(
            "SELECT id, vault_id FROM memories ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    data.store = SQLiteStore(path)  # the newest row deleted: its seq is given out again
    data.store.delete_ids(vault, [newest])
    data.raw(vault, 1)
    data.store.close()
    store = data.store = SQLiteStore(path, bm25=FTS5_BM25, serving=True)
    assert not _segments_mapped(store)  # not trusted: loaded from FTS5
    assert_same_as_fts(data, rng, ["a", "b"])
    store.close()
