"""The embedded store: stdlib sqlite3 in WAL mode, one writer, many readers, FTS5.

All writes go through one connection under a lock (SQLite allows one writer anyway), each
use case in one ``BEGIN IMMEDIATE`` transaction; readers get a connection per thread and
see committed snapshots.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.errors import StoreUnavailable
from mcp_memoryrouter.private import private_database
from mcp_memoryrouter.vault.rules import counters
from mcp_memoryrouter.vault.rules.date_words import date_words
from mcp_memoryrouter.vault.rules.domain import (
    Batch,
    CommitOutcome,
    Counters,
    Created,
    DeleteOutcome,
    EmptyCheckout,
    Entry,
    ExportedMemory,
    KeyRecord,
    Lineage,
    NewRaw,
    ScoredMemory,
    SearchFilter,
    SourceTier,
    Stats,
    Tier,
    TierTotals,
    UsageEvent,
    UsageLine,
)
from mcp_memoryrouter.vault.rules.selection import Selection
from mcp_memoryrouter.vault.rules.window import Order, Page
from mcp_memoryrouter.vault.search.lexical import BM25, Bm25, LexicalIndex
from mcp_memoryrouter.vault.search.ranking import prune_common
from mcp_memoryrouter.vault.search.vectors import Pending, VectorIndex
from mcp_memoryrouter.vault.store import (
    backup_rows,
    sqlite_lexical,
    sqlite_owner,
    sqlite_reflect,
    sqlite_vectors,
    sqlite_window,
)
from mcp_memoryrouter.vault.store.sqlite_rows import (
    MEMORY_COLUMNS,
    memory_from_row,
    placeholders,
)

log = logging.getLogger(__name__)

_CHUNK = 400  # ids per IN (...) list, well under SQLite's variable limit
_KEYS = (
    "SELECT k.vault_id, v.ref, k.name, k.read_only, k.created_ms, k.id, k.prefix, "
    "k.last_used_ms FROM keys k JOIN vaults v ON v.id = k.vault_id"
)


def _key(row: tuple[Any, ...]) -> KeyRecord:
    return KeyRecord(row[0], row[1], row[2], bool(row[3]), row[4], row[5], row[6], row[7])


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every migration newer than ``PRAGMA user_version``; return the new version."""
    (current,) = conn.execute("PRAGMA user_version").fetchone()
    folder = resources.files("mcp_memoryrouter.vault.migrations").joinpath("sqlite")
    scripts = sorted(p.name for p in folder.iterdir() if p.name.endswith(".sql"))
    for name in scripts:
        version = int(name.split("_", 1)[0])
        if version <= current:
            continue
        conn.executescript(
            "BEGIN IMMEDIATE;\n"
            + folder.joinpath(name).read_text(encoding="utf-8")
            + f"\nPRAGMA user_version = {version};\nCOMMIT;"
        )
        current = version
    return int(current)


class SQLiteStore:
    def __init__(self, path: Path | str, bm25: Bm25 = BM25, *, serving: bool = False) -> None:
        """``serving``: this store answers searches for as long as it is open, so it claims
        the file against other serving processes (see :mod:`.sqlite_owner`)."""
        self._path = str(path)
        self._owner = sqlite_owner.claim(self._path) if serving else None
        private_database(self._path)  # before connecting: the WAL takes the file's mode
        self._bm25 = bm25
        self._lock = threading.RLock()
        self._writer = _connect(self._path)
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._indexes: dict[str, VectorIndex] = {}
        self._index_lock = threading.Lock()
        self.schema_version = migrate(self._writer)
        # The in-memory BM25 index (loaded by warm() or the first search) and what keeps it
        # in step: a change log the writer's triggers fill, applied after each commit.
        self._writer.execute("PRAGMA temp_store = MEMORY")
        self._writer.executescript(sqlite_lexical.CHANGE_LOG)
        self._lexicon: LexicalIndex | None = None
        self._lexicon_lock = threading.Lock()
        self._doc_tokens = sqlite_lexical.Tokenizer()
        self._query_tokens = sqlite_lexical.Tokenizer()

    def warm(self, models: Sequence[tuple[str, int]]) -> None:
        self._lexical_index()
        for model, dim in models:
            self._index(model, dim).warm()

    def close(self) -> None:
        with self._lock:
            for conn in [self._writer, *self._readers]:
                conn.close()
            self._readers.clear()
            self._doc_tokens.close()
            self._query_tokens.close()
            if self._owner is not None:
                self._owner.close()  # releases the claim
                self._owner = None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._writer
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"store unavailable: {type(exc).__name__}") from exc
            try:
                yield conn
            except sqlite3.Error as exc:
                conn.execute("ROLLBACK")
                raise StoreUnavailable(f"store unavailable: {type(exc).__name__}") from exc
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            try:
                sqlite_lexical.apply_log(conn, self._lexicon, self._doc_tokens)
            except Exception as exc:  # the write stands; the index reloads at the next search
                log.error("lexical index update failed, reloading: %s", type(exc).__name__)
                self._lexicon = None

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self._path)
            self._local.conn = conn
            with self._lock:
                self._readers.append(conn)
        conn.execute("BEGIN")
        try:
            yield conn
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"store unavailable: {type(exc).__name__}") from exc
        finally:
            conn.execute("COMMIT")

    # --- vaults and keys ---------------------------------------------------------------

    def create_vault(self, vault_id: str, ref: str, now_ms: int) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO vaults (id, ref, created_ms) VALUES (?, ?, ?)", (vault_id, ref, now_ms)
            )

    def add_key(self, record: KeyRecord, key_hash: str) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO keys (hash, vault_id, name, read_only, created_ms, id, prefix) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    key_hash,
                    record.vault_id,
                    record.name,
                    int(record.read_only),
                    record.created_ms,
                    record.id,
                    record.prefix,
                ),
            )

    def find_key(self, key_hash: str) -> KeyRecord | None:
        with self._read() as conn:
            row = conn.execute(f"{_KEYS} WHERE k.hash = ?", (key_hash,)).fetchone()
        return None if row is None else _key(row)

    def list_keys(self, vault_id: str) -> list[KeyRecord]:
        with self._read() as conn:
            rows = conn.execute(
                f"{_KEYS} WHERE k.vault_id = ? ORDER BY k.created_ms, k.id", (vault_id,)
            ).fetchall()
        return [_key(row) for row in rows]

    def revoke_key(self, vault_id: str, key_id: str) -> bool:
        with self._write() as conn:
            cursor = conn.execute(
                "DELETE FROM keys WHERE vault_id = ? AND id = ?", (vault_id, key_id)
            )
        return cursor.rowcount == 1

    def touch_key(self, key_hash: str, now_ms: int, unless_since_ms: int) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE keys SET last_used_ms = ? WHERE hash = ? "
                "AND (last_used_ms IS NULL OR last_used_ms < ?)",
                (now_ms, key_hash, unless_since_ms),
            )

    def vaults(self) -> list[tuple[str, str]]:
        with self._read() as conn:
            rows = conn.execute("SELECT id, ref FROM vaults ORDER BY created_ms, ref").fetchall()
        return [(row[0], row[1]) for row in rows]

    def vault_count(self) -> int:
        with self._read() as conn:
            (count,) = conn.execute("SELECT count(*) FROM vaults").fetchone()
        return int(count)

    # --- raw memories ------------------------------------------------------------------

    def ingest(
        self, vault_id: str, rows: Sequence[NewRaw], embed_model: str | None
    ) -> tuple[list[str], int, int]:
        ids: list[str] = []
        new_seqs: list[int] = []
        tokens = 0
        with self._write() as conn:
            for row in rows:
                cursor = conn.execute(
                    "INSERT INTO memories (id, vault_id, tier, role, content, tokens, date_from, "
                    "date_to, session_id, dedup, created_ms, dated) "
                    "VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (
                        row.id,
                        vault_id,
                        row.role,
                        row.content,
                        row.tokens,
                        row.date_ms,
                        row.date_ms,
                        row.session_id,
                        row.dedup,
                        row.created_ms,
                        date_words(row.date_ms, row.date_ms),
                    ),
                )
                if cursor.rowcount == 1:
                    assert cursor.lastrowid is not None
                    new_seqs.append(cursor.lastrowid)
                    ids.append(row.id)
                    tokens += row.tokens
                    continue
                (existing,) = conn.execute(
                    "SELECT id FROM memories WHERE vault_id = ? AND dedup = ?",
                    (vault_id, row.dedup),
                ).fetchone()
                ids.append(existing)
            stored = len(new_seqs)
            conn.execute(
                "UPDATE vaults SET raw_units = raw_units + ?, raw_tokens = raw_tokens + ?, "
                "n1 = n1 + ?, tok1 = tok1 + ? WHERE id = ?",
                (stored, tokens, stored, tokens, vault_id),
            )
            sqlite_vectors.enqueue(conn, embed_model, new_seqs)
        return ids, stored, tokens

    def counters(self, vault_id: str) -> Counters:
        with self._read() as conn:
            row = conn.execute(
                "SELECT raw_units, raw_tokens, t2_count, t2_importance, t2_tokens "
                "FROM vaults WHERE id = ?",
                (vault_id,),
            ).fetchone()
        return Counters(*row)

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
                        self._lexicon = sqlite_lexical.load_index(self._writer, self._bm25)
                    finally:
                        self._writer.execute("COMMIT")
            return self._lexicon

    def date_page(
        self, vault_id: str, start: int, end: int, order: Order, where: SearchFilter, budget: int
    ) -> Page:
        with self._read() as conn:
            return sqlite_window.date_page(conn, vault_id, start, end, order, where, budget)

    # --- consolidation -----------------------------------------------------------------

    def checkout(
        self,
        vault_id: str,
        tier: SourceTier,
        rule: Selection,
        batch_id: str,
        now_ms: int,
        lease_until_ms: int,
        session_id: str | None,
    ) -> Batch | EmptyCheckout:
        with self._write() as conn:
            return sqlite_reflect.checkout(
                conn, vault_id, tier, rule, batch_id, now_ms, lease_until_ms, session_id
            )

    def commit(
        self,
        vault_id: str,
        batch_id: str,
        entries: Sequence[Entry],
        now_ms: int,
        embed_model: str | None,
    ) -> CommitOutcome:
        with self._write() as conn:
            return sqlite_reflect.commit(conn, vault_id, batch_id, entries, now_ms, embed_model)

    def import_reflections(
        self,
        vault_id: str,
        tier: Tier,
        entries: Sequence[Entry],
        source_ids: Sequence[str],
        covers: tuple[int, int] | None,
        now_ms: int,
        embed_model: str | None,
        sources_deleted: int = 0,
    ) -> list[Created]:
        with self._write() as conn:
            created = sqlite_reflect.import_reflections(
                conn, vault_id, tier, entries, source_ids, covers, now_ms, embed_model
            )
            backup_rows.link_deleted_sources(conn, "?", vault_id, created, sources_deleted)
            return created

    def export_rows(self, vault_id: str, limit: int) -> Iterator[ExportedMemory]:
        # A connection of its own: the read transaction lasts the whole stream, whose pages
        # are read on whichever thread the response runs on (WAL: writers go on meanwhile).
        conn = _connect(self._path)
        try:
            conn.execute("BEGIN")
            yield from backup_rows.export_all(conn, "?", vault_id, limit)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"store unavailable: {type(exc).__name__}") from exc
        finally:
            conn.close()  # ends the read transaction, also when the client went away

    def mark_consolidated(self, vault_id: str, ids: Sequence[str]) -> int:
        with self._write() as conn:
            return backup_rows.mark_consolidated(conn, "?", vault_id, ids)

    def links(
        self, vault_id: str, parents: Sequence[str], sources: Sequence[str]
    ) -> list[tuple[str, str]]:
        with self._read() as conn:
            return sqlite_reflect.links(conn, vault_id, parents, sources)

    def lineage(
        self, vault_id: str, memory_id: str, offset: int, limit: int, similar_in: str | None
    ) -> Lineage:
        with self._read() as conn:
            return sqlite_reflect.read_lineage(conn, vault_id, memory_id, offset, limit, similar_in)

    # --- vectors -----------------------------------------------------------------------

    def queued_models(self) -> list[str]:
        with self._read() as conn:
            return sqlite_vectors.queued_models(conn)

    def take_embed_batch(self, model: str, limit: int) -> list[Pending]:
        with self._read() as conn:
            return sqlite_vectors.take(conn, model, limit)

    def take_embed_rows(self, model: str, ids: Sequence[str]) -> list[Pending]:
        with self._read() as conn:
            return sqlite_vectors.take(conn, model, len(ids), ids)

    def put_vectors(
        self, model: str, pending: Sequence[Pending], vectors: npt.NDArray[np.float32]
    ) -> None:
        with self._write() as conn:
            kept = set(sqlite_vectors.put(conn, model, pending, vectors))
            index = self._indexes.get(model)
            if index is not None:  # under the write lock: no delete can slip in between
                rows = [
                    (p.row, v) for p, v in zip(pending, vectors, strict=True) if p.row.seq in kept
                ]
                if rows:
                    index.add([r for r, _ in rows], np.stack([v for _, v in rows]))

    def search_vectors(
        self,
        vault_id: str,
        model: str,
        dim: int,
        query: npt.NDArray[np.float32],
        k: int,
        where: SearchFilter,
    ) -> list[ScoredMemory]:
        index = self._index(model, dim)
        hits = sorted(index.search(vault_id, query, k, where), key=lambda h: (-h[1], h[0]))
        return self._rows_by_seq(vault_id, hits)

    def _rows_by_seq(self, vault_id: str, hits: Sequence[tuple[int, float]]) -> list[ScoredMemory]:
        """The memories of an in-memory index's (seq, score) hits, in the hits' order; a row
        deleted since the index answered is left out."""
        if not hits:
            return []
        with self._read() as conn:
            rows = conn.execute(
                # By primary key: with a plain ``m.vault_id = ?`` the planner walked the
                # vault's index (every row of the vault) instead.
                f"SELECT {MEMORY_COLUMNS}, m.seq FROM memories m "
                f"WHERE m.seq IN ({placeholders(len(hits))}) AND +m.vault_id = ?",
                [*(seq for seq, _ in hits), vault_id],
            ).fetchall()
        found = {r[10]: memory_from_row(r) for r in rows}
        return [
            ScoredMemory(replace(found[seq], seq=seq), score) for seq, score in hits if seq in found
        ]

    def pending_embeddings(self, vault_id: str) -> int:
        with self._read() as conn:
            return sqlite_vectors.pending_count(conn, vault_id)

    def _index(self, model: str, dim: int) -> VectorIndex:
        with self._index_lock:
            index = self._indexes.get(model)
            if index is None:
                with self._lock, self._read() as conn:  # no vector lands while loading
                    index = sqlite_vectors.load_index(conn, model, dim)
                self._indexes[model] = index
            return index

    def _loaded_indexes(self) -> list[VectorIndex]:
        with self._index_lock:
            return list(self._indexes.values())

    # --- deletion ----------------------------------------------------------------------

    def delete_ids(self, vault_id: str, ids: Sequence[str]) -> DeleteOutcome:
        deleted = tokens = 0
        seqs: list[int] = []
        with self._write() as conn:
            for start in range(0, len(ids), _CHUNK):
                chunk = list(ids[start : start + _CHUNK])
                rows = conn.execute(
                    "SELECT seq, id, tier, tokens, importance, consolidated FROM memories "
                    f"WHERE vault_id = ? AND id IN ({placeholders(len(chunk))})",
                    [vault_id, *chunk],
                ).fetchall()
                if not rows:
                    continue
                marks = placeholders(len(rows))
                conn.execute(f"DELETE FROM memories WHERE seq IN ({marks})", [r[0] for r in rows])
                conn.execute(
                    f"DELETE FROM lineage WHERE parent_id IN ({marks})", [r[1] for r in rows]
                )
                _apply(conn, vault_id, counters.after_delete(r[2:6] for r in rows))
                deleted += len(rows)
                tokens += sum(r[3] for r in rows)
                seqs += [r[0] for r in rows]
        for index in self._loaded_indexes():
            index.remove(seqs)
        return DeleteOutcome(len(ids), deleted, len(ids) - deleted, tokens)

    def wipe(self, vault_id: str) -> int:
        with self._write() as conn:
            cursor = conn.execute("DELETE FROM memories WHERE vault_id = ?", (vault_id,))
            count = cursor.rowcount
            conn.execute("DELETE FROM lineage WHERE vault_id = ?", (vault_id,))
            conn.execute(
                "DELETE FROM batch_sources WHERE batch_id IN "
                "(SELECT id FROM batches WHERE vault_id = ?)",
                (vault_id,),
            )
            conn.execute("DELETE FROM batches WHERE vault_id = ?", (vault_id,))
            conn.execute(
                "UPDATE vaults SET raw_units = 0, raw_tokens = 0, t2_count = 0, "
                "t2_importance = 0, t2_tokens = 0, n1 = 0, tok1 = 0, n2 = 0, tok2 = 0, "
                "imp2 = 0, n3 = 0, tok3 = 0, imp3 = 0 WHERE id = ?",
                (vault_id,),
            )
        for index in self._loaded_indexes():
            index.remove_vault(vault_id)
        return int(count)

    # --- stats and usage ---------------------------------------------------------------

    def stats(self, vault_id: str) -> Stats:
        with self._read() as conn:
            v = conn.execute(
                "SELECT ref, raw_units, raw_tokens, t2_count, t2_importance, t2_tokens, "
                "n1, tok1, n2, tok2, imp2, n3, tok3, imp3 FROM vaults WHERE id = ?",
                (vault_id,),
            ).fetchone()
            # Two ordered lookups: min() and max() in one query would scan the vault's index.
            oldest = conn.execute(
                "SELECT date_from FROM memories WHERE vault_id = ? ORDER BY date_from LIMIT 1",
                (vault_id,),
            ).fetchone()
            newest = conn.execute(
                "SELECT date_from FROM memories WHERE vault_id = ? ORDER BY date_from DESC LIMIT 1",
                (vault_id,),
            ).fetchone()
        totals = {
            1: TierTotals(v[6], v[7], 0),
            2: TierTotals(v[8], v[9], v[10]),
            3: TierTotals(v[11], v[12], v[13]),
        }
        return Stats(v[0], totals, oldest and oldest[0], newest and newest[0], Counters(*v[1:6]))

    def record_usage(self, vault_id: str, events: Sequence[UsageEvent], now_ms: int) -> None:
        if not events:
            return
        with self._write() as conn:
            conn.executemany(
                "INSERT INTO usage_events (vault_id, at_ms, endpoint, kind, tokens, session_id) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(vault_id, now_ms, e.endpoint, e.kind, e.tokens, e.session_id) for e in events],
            )

    def usage(self, vault_id: str, from_ms: int, to_ms: int) -> list[UsageLine]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT endpoint, kind, session_id, count(*), sum(tokens) FROM usage_events "
                "WHERE vault_id = ? AND at_ms BETWEEN ? AND ? "
                "GROUP BY endpoint, kind, session_id ORDER BY endpoint, kind, session_id",
                (vault_id, from_ms, to_ms),
            ).fetchall()
        return [UsageLine(*row) for row in rows]


def _apply(conn: sqlite3.Connection, vault_id: str, deltas: counters.Deltas) -> None:
    sql, params = counters.update_statement(deltas, "?")
    conn.execute(sql, [*params, vault_id])
