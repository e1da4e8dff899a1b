"""The embedded store: stdlib sqlite3 in WAL mode, one writer, many readers, and the search
indexes kept in memory.

All writes go through one connection under a lock (SQLite allows one writer anyway), each
use case in one ``BEGIN IMMEDIATE`` transaction; readers get a connection per thread and
see committed snapshots. The BM25 and vector indexes (:mod:`...search`) live in this
process and follow every commit, which is why one process serves a SQLite vault
(:mod:`.owner`).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.db import Tx
from mcp_memoryrouter.db.migrations import migrate_sqlite
from mcp_memoryrouter.db.sqlite import SqliteTx, connect
from mcp_memoryrouter.errors import StoreUnavailable
from mcp_memoryrouter.private import private_database
from mcp_memoryrouter.vault.rules.domain import ExportedMemory, Memory, ScoredMemory, SearchFilter
from mcp_memoryrouter.vault.search.index import SearchIndex
from mcp_memoryrouter.vault.search.lexical import BM25, Bm25, LexicalIndex
from mcp_memoryrouter.vault.search.ranking import prune_common
from mcp_memoryrouter.vault.search.vectors import Pending, VectorIndex, VectorQuery
from mcp_memoryrouter.vault.store import backup
from mcp_memoryrouter.vault.store.base import Store
from mcp_memoryrouter.vault.store.sql import MEMORY_COLUMNS, MIGRATIONS, memory_from_row
from mcp_memoryrouter.vault.store.sqlite import lexical, owner, vectors

log = logging.getLogger(__name__)
T = TypeVar("T")


def _unavailable(exc: sqlite3.Error) -> StoreUnavailable:
    return StoreUnavailable(f"store unavailable: {type(exc).__name__}")


class SQLiteStore(Store):
    def __init__(self, path: Path | str, bm25: Bm25 = BM25, *, serving: bool = False) -> None:
        """``serving``: this store answers searches for as long as it is open, so it claims
        the file against other serving processes (see :mod:`.owner`)."""
        self._path = str(path)
        self._owner = owner.claim(self._path) if serving else None
        private_database(self._path)  # before connecting: the WAL takes the file's mode
        self._bm25 = bm25
        self._lock = threading.RLock()
        self._writer = connect(self._path)
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._indexes: dict[str, VectorIndex] = {}
        self._index_lock = threading.Lock()
        self._closed = False
        self._save_lock = threading.Lock()
        self.schema_version = migrate_sqlite(self._writer, MIGRATIONS)
        # The in-memory BM25 index (loaded by warm() or the first search) and what keeps it
        # in step: a change log the writer's triggers fill, applied after each commit.
        self._writer.execute("PRAGMA temp_store = MEMORY")
        self._writer.executescript(lexical.CHANGE_LOG)
        self._lexicon: LexicalIndex | None = None
        self._lexicon_lock = threading.Lock()
        self._lexicon_saved = 0  # the index's changes when it was last saved or loaded
        self._doc_tokens = lexical.Tokenizer()
        self._query_tokens = lexical.Tokenizer()

    def warm(self, models: Sequence[tuple[str, int]]) -> None:
        self._lexical_index()
        for model, dim in models:
            self._index(model, dim)  # loaded; a fit it needs runs in a thread of its own

    def close(self) -> None:
        self._save_lexicon()
        self._closed = True  # a fit ending from now on saves nothing
        for model in self._loaded_models():
            self._save_vectors(model, closing=True)
        with self._lock:
            for conn in [self._writer, *self._readers]:
                conn.close()
            self._readers.clear()
            self._doc_tokens.close()
            self._query_tokens.close()
            if self._owner is not None:
                self._owner.close()  # releases the claim
                self._owner = None

    # --- transactions ------------------------------------------------------------------

    @contextmanager
    def _writer_conn(self) -> Iterator[sqlite3.Connection]:
        """The writer, in one ``BEGIN IMMEDIATE`` transaction; the lexical index follows
        the commit."""
        with self._lock:
            conn = self._writer
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _unavailable(exc) from exc
            try:
                yield conn
            except sqlite3.Error as exc:
                conn.execute("ROLLBACK")
                raise _unavailable(exc) from exc
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            try:
                lexical.apply_log(conn, self._lexicon, self._doc_tokens)
            except Exception as exc:  # the write stands; the index reloads at the next search
                log.error("lexical index update failed, reloading: %s", type(exc).__name__)
                self._lexicon = None

    @contextmanager
    def _reader_conn(self) -> Iterator[sqlite3.Connection]:
        """This thread's reader, in one read transaction (a snapshot)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self._path)
            self._local.conn = conn
            with self._lock:
                self._readers.append(conn)
        conn.execute("BEGIN")
        try:
            yield conn
        except sqlite3.Error as exc:
            raise _unavailable(exc) from exc
        finally:
            conn.execute("COMMIT")

    def _write(self, work: Callable[[Tx], T]) -> T:
        with self._writer_conn() as conn:
            return work(SqliteTx(conn))

    def _read(self, work: Callable[[Tx], T]) -> T:
        with self._reader_conn() as conn:
            return work(SqliteTx(conn))

    def export_rows(self, vault_id: str, limit: int) -> Iterator[ExportedMemory]:
        # A connection of its own: the read transaction lasts the whole stream, whose pages
        # are read on whichever thread the response runs on (WAL: writers go on meanwhile).
        conn = connect(self._path)
        try:
            conn.execute("BEGIN")
            yield from backup.export_all(SqliteTx(conn), vault_id, limit)
        except sqlite3.Error as exc:
            raise _unavailable(exc) from exc
        finally:
            conn.close()  # ends the read transaction, also when the client went away

    # --- lexical search ----------------------------------------------------------------

    def search_lexical(
        self, vault_id: str, terms: Sequence[str], limit: int, where: SearchFilter
    ) -> list[ScoredMemory]:
        if not terms:
            return []
        index = self._lexical_index()
        kept = set(prune_common(terms, *index.doc_freqs(vault_id, terms)))  # the vault's own
        words = [t for t in terms if t in kept]
        # A word FTS5 splits (``foo_bar``) counts as its tokens, as a hyphenated word does.
        tokens = [token for split in self._query_tokens.words(words) for token in split]
        return self._rows_by_seq(vault_id, index.search(vault_id, tokens, limit, where))

    def _lexical_index(self) -> LexicalIndex:
        with self._lexicon_lock:
            if self._lexicon is None:
                with self._lock:  # the writer lock: nothing commits while the index loads
                    self._writer.execute("BEGIN")
                    try:
                        self._writer.execute("DELETE FROM temp.lexical_log")
                        self._lexicon = lexical.open_index(
                            self._writer, self._bm25, self._doc_tokens, self._lexical_saved()
                        )
                        self._lexicon_saved = self._lexicon.changes
                    finally:
                        self._writer.execute("COMMIT")
            return self._lexicon

    def _lexical_saved(self) -> Path | None:
        """Where a serving store keeps its large BM25 index between runs."""
        if self._owner is None or self._path == ":memory:" or self._path.startswith("file:"):
            return None
        return Path(self._path + ".lexical")

    def _save_lexicon(self) -> None:
        """Save the BM25 index if it changed since it was loaded or saved (under the writer
        lock: nothing commits meanwhile)."""
        saved = self._lexical_saved()
        with self._lock:
            index = self._lexicon
            if saved is None or index is None or index.changes == self._lexicon_saved:
                return
            lexical.save_index(self._writer, index, saved)
            self._lexicon_saved = index.changes

    # --- vectors -----------------------------------------------------------------------

    def _take(self, model: str, limit: int, ids: Sequence[str]) -> list[Pending]:
        return self._read(lambda tx: vectors.take(tx, model, limit, ids))

    def put_vectors(
        self, model: str, pending: Sequence[Pending], found: npt.NDArray[np.float32]
    ) -> None:
        with self._writer_conn() as conn:
            kept = set(vectors.put(SqliteTx(conn), model, pending, found))
            index = self._indexes.get(model)
            if index is not None:  # under the write lock: no delete can slip in between
                rows = [
                    (p.row, v) for p, v in zip(pending, found, strict=True) if p.row.seq in kept
                ]
                if rows:
                    index.add([r for r, _ in rows], np.stack([v for _, v in rows]))

    def search_vectors(
        self, vault_id: str, query: VectorQuery, k: int, where: SearchFilter
    ) -> list[ScoredMemory]:
        index = self._index(query.model, query.dim)
        hits = index.search(vault_id, query.vector, k, where)
        hits.sort(key=lambda h: (-h[1], h[0]))
        return self._rows_by_seq(vault_id, hits)

    def _similar_sources(
        self, model: str, tx: Tx, vault_id: str, memory: Memory, offset: int, limit: int
    ) -> tuple[tuple[Memory, ...], tuple[float | None, ...]]:
        return vectors.similar_sources(tx, vault_id, memory, model, offset, limit)

    def _index(self, model: str, dim: int) -> VectorIndex:
        with self._index_lock:
            index = self._indexes.get(model)
            if index is None:
                saved = self._snapshot(model)
                with self._lock, self._reader_conn() as conn:  # no vector lands while loading
                    index = vectors.load_index(conn, model, dim, saved)
                if saved is not None:  # a serving store saves what it fits
                    index.on_fitted = partial(self._save_vectors, model)
                index.start()
                self._indexes[model] = index
            return index

    def _snapshot(self, model: str) -> Path | None:
        """Where a serving store keeps the model's large index between runs."""
        if self._owner is None or self._path == ":memory:" or self._path.startswith("file:"):
            return None
        return vectors.snapshot_path(self._path, model)

    def _save_vectors(self, model: str, closing: bool = False) -> None:
        """Save the model's index if it is large: after each fit, and at close when a
        sixteenth of its rows changed since (a start reads fewer from SQLite than that
        costs to write) and no fit is running (it would be saved stale, and waited for)."""
        path, index = self._snapshot(model), self._indexes.get(model)
        if path is None or index is None:
            return
        if closing:
            changed = index.changes - index.saved_changes
            if index.fitting or (index.saved_changes >= 0 and changed <= len(index) // 16):
                return
        elif self._closed:
            return
        try:
            with self._save_lock:
                vectors.save_index(index, path, model)
        except OSError as exc:  # the database stands; the next start reads it
            log.warning("vector index not saved: %s", type(exc).__name__)

    def _rows_by_seq(self, vault_id: str, hits: Sequence[tuple[int, float]]) -> list[ScoredMemory]:
        """The memories of an in-memory index's (seq, score) hits, in the hits' order; a row
        deleted since the index answered is left out."""
        if not hits:
            return []

        def work(tx: Tx) -> dict[int, Memory]:
            test, seqs = tx.among([seq for seq, _ in hits])
            rows = tx.all(
                # By primary key: with a plain ``m.vault_id = ?`` the planner walked the
                # vault's index (every row of the vault) instead.
                f"SELECT {MEMORY_COLUMNS}, m.seq FROM memories m "
                f"WHERE m.seq {test} AND +m.vault_id = ?",
                [*seqs, vault_id],
            )
            return {r[10]: memory_from_row(r, r[10]) for r in rows}

        found = self._read(work)
        return [ScoredMemory(found[seq], score) for seq, score in hits if seq in found]

    # --- the in-memory indexes after deletes -------------------------------------------

    def _loaded_indexes(self) -> list[SearchIndex[Any]]:
        """The vector indexes loaded so far (the lexical index follows the change log)."""
        with self._index_lock:
            return list(self._indexes.values())

    def _loaded_models(self) -> list[str]:
        with self._index_lock:
            return list(self._indexes)

    def _forget(self, seqs: Sequence[int]) -> None:
        for index in self._dropped_snapshots():
            index.remove(seqs)

    def _forget_vault(self, vault_id: str) -> None:
        for index in self._dropped_snapshots():
            index.remove_vault(vault_id)

    def _dropped_snapshots(self) -> list[VectorIndex]:
        """After a delete: the saved indexes removed (a seq deleted may come back for
        another memory), the loaded ones to be saved again at close."""
        vectors.drop_snapshots(self._path)
        with self._index_lock:
            loaded = list(self._indexes.values())
        for index in loaded:
            index.saved_changes = -1
        return loaded

    def _forget_model(self, model: str) -> None:
        """A replaced model's index and its saved file go; other models' stay (every start
        asks to replace the local model's earlier forms, usually with nothing to do)."""
        if (saved := self._snapshot(model)) is not None:
            saved.unlink(missing_ok=True)
        with self._index_lock:
            self._indexes.pop(model, None)
