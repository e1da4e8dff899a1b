"""The SQLite store's in-memory BM25 index (:mod:`mcp_memoryrouter.vault.search.lexical`): its
tokens come from FTS5 itself, and a change log kept by triggers keeps it in step.

- **Tokens.** An in-memory FTS5 table with the vault's tokenizer turns text into tokens
  (``fts5vocab`` ``instance`` rows), so a word is stemmed and split exactly as the
  on-disk index does it. The whole index loads from the on-disk FTS5 index the same way.
- **Change log.** Temporary triggers on the writer connection append every inserted and
  deleted memory's seq to a temporary table, inside the writing transaction: a rollback
  takes its log entries with it, and no write path can forget to tell the index. The
  store applies the log after each commit, still holding the writer lock.
- **Snapshot.** A serving store saves a large index beside the database
  (:mod:`...search.lexical_snapshot`) after loading it and when it closes. A start reads
  it back when the row that had the largest seq then is still there, unchanged (seqs only
  grow while it stands, so no seq the snapshot holds was given to another memory), then
  drops the rows deleted since and tokenizes the rows added since: the same index as a
  load from FTS5, without reading every token occurrence of the vault.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.db.sqlite import in_memory
from mcp_memoryrouter.vault.search import lexical_snapshot
from mcp_memoryrouter.vault.search.lexical import Bm25, LexicalDoc, LexicalIndex
from mcp_memoryrouter.vault.search.rowtable import IndexRow
from mcp_memoryrouter.vault.store.sql import writer_sql

# The tokenizer of ``memories_fts`` (migration 0003); a test reads it back from the schema.
TOKENIZE = "porter unicode61"

CHANGE_LOG = """
CREATE TEMP TABLE IF NOT EXISTS lexical_log (added INTEGER NOT NULL, seq INTEGER NOT NULL);
CREATE TEMP TRIGGER IF NOT EXISTS lexical_added AFTER INSERT ON main.memories BEGIN
    INSERT INTO lexical_log (added, seq) VALUES (1, new.seq);
END;
CREATE TEMP TRIGGER IF NOT EXISTS lexical_deleted AFTER DELETE ON main.memories BEGIN
    INSERT INTO lexical_log (added, seq) VALUES (0, old.seq);
END;
"""

_ROW = f"seq, vault_id, tier, importance, date_from, date_to, session_id, {writer_sql()}"
_CHUNK = 500
SNAPSHOT_FROM = 10_000  # rows: a smaller index loads from FTS5 in well under a second
_TOP = "SELECT seq, id, created_ms FROM memories ORDER BY seq DESC LIMIT 1"

log = logging.getLogger(__name__)


class Tokenizer:
    """FTS5's tokenizer, run on text that is not in the vault."""

    def __init__(self) -> None:
        self._conn = in_memory()
        self._conn.execute(
            # contentless: the text is only tokenized; each use rolls its rows back
            "CREATE VIRTUAL TABLE t USING fts5 "
            f"(content, dated, content = '', tokenize = '{TOKENIZE}')"
        )
        self._conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab (t, 'instance')")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._conn.close()

    def _run(self, texts: Sequence[tuple[str, str]]) -> list[list[tuple[str, int]]]:
        """Each text's (token, offset) pairs."""
        out: list[list[tuple[str, int]]] = [[] for _ in texts]
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany(
                    "INSERT INTO t (rowid, content, dated) VALUES (?, ?, ?)",
                    [(i, content, dated) for i, (content, dated) in enumerate(texts)],
                )
                for term, doc, offset in self._conn.execute("SELECT term, doc, offset FROM v"):
                    out[doc].append((term, offset))
            finally:
                self._conn.execute("ROLLBACK")  # the scratch table is empty again
        return out

    def counts(self, texts: Sequence[tuple[str, str]]) -> list[dict[str, int]]:
        """How often each token occurs in each (content, dated) pair."""
        result = []
        for pairs in self._run(texts):
            counts: dict[str, int] = {}
            for token, _ in pairs:
                counts[token] = counts.get(token, 0) + 1
            result.append(counts)
        return result

    def words(self, words: Sequence[str]) -> list[list[str]]:
        """Each word's tokens, in order (usually one; none for a word of punctuation)."""
        return [
            [token for token, _ in sorted(pairs, key=lambda p: p[1])]
            for pairs in self._run([(word, "") for word in words])
        ]


def load_index(conn: sqlite3.Connection, params: Bm25) -> LexicalIndex:
    """The index of every memory, read from the on-disk FTS5 index (caller holds the
    writer lock, so nothing commits in between)."""
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memories_instances "
        "USING fts5vocab (main, memories_fts, 'instance')"
    )
    rows = (IndexRow(*r) for r in conn.execute(f"SELECT {_ROW} FROM memories ORDER BY seq"))
    cursor = conn.cursor().execute("SELECT term, doc FROM temp.memories_instances")
    return LexicalIndex.bulk(rows, iter(lambda: cursor.fetchmany(65_536), []), params)


def open_index(
    conn: sqlite3.Connection, params: Bm25, tokens: Tokenizer, saved: Path | None
) -> LexicalIndex:
    """The index of every memory: from the snapshot at ``saved`` brought up to date when it
    can be, else from the on-disk FTS5 index (then saved, when large). The caller holds the
    writer lock."""
    if saved is not None:
        index = _restored(conn, params, tokens, saved)
        if index is not None:
            return index
    index = load_index(conn, params)
    if saved is not None:
        save_index(conn, index, saved)
    return index


def save_index(conn: sqlite3.Connection, index: LexicalIndex, saved: Path) -> None:
    """Save a large index beside the database (under the writer lock: nothing changes)."""
    if len(index) < SNAPSHOT_FROM:
        return
    top = conn.execute(_TOP).fetchone()
    meta = {"tokenize": TOKENIZE, "top": None if top is None else list(top)}
    try:
        lexical_snapshot.save(index, saved, meta)
    except OSError as exc:  # the database stands; the next start loads from FTS5
        log.warning("lexical index not saved: %s", type(exc).__name__)


def _restored(
    conn: sqlite3.Connection, params: Bm25, tokens: Tokenizer, saved: Path
) -> LexicalIndex | None:
    """The saved index with the rows deleted and added since; None when there is none, it
    cannot be read, its newest row is gone or changed, or most rows are new."""
    try:
        loaded = lexical_snapshot.load(saved, params)
    except (OSError, ValueError, KeyError) as exc:
        log.warning("saved lexical index not read (%s): loading from FTS5", type(exc).__name__)
        return None
    if loaded is None:
        return None
    index, meta = loaded
    top = conn.execute(_TOP).fetchone()
    if meta.get("tokenize") != TOKENIZE or top is None or meta.get("top") is None:
        return None
    seq, memory_id, created = meta["top"]
    row = conn.execute("SELECT id, created_ms FROM memories WHERE seq = ?", (seq,)).fetchone()
    if row is None or tuple(row) != (memory_id, created):
        return None  # the newest row was deleted: a seq it held may now be another memory's
    now = np.sort(np.fromiter((r[0] for r in conn.execute("SELECT seq FROM memories")), np.int64))
    held = np.sort(index.seqs())
    added = _missing(now, held).tolist()
    if len(added) * 2 > now.size:
        return None
    index.remove(_missing(held, now).tolist())
    for start in range(0, len(added), _CHUNK):
        index.add(_docs(conn, added[start : start + _CHUNK], tokens))
    return index


def _missing(values: npt.NDArray[np.int64], among: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The ``values`` (ascending) that are not ``among`` (ascending): a binary search each,
    where ``np.setdiff1d`` hashes both (half of a start from the snapshot)."""
    if not among.size:
        return values
    at = np.minimum(np.searchsorted(among, values), among.size - 1)
    missing: npt.NDArray[np.int64] = values[among[at] != values]
    return missing


def apply_log(conn: sqlite3.Connection, index: LexicalIndex | None, tokens: Tokenizer) -> None:
    """Bring the index up to date with the log, then empty the log (after a commit, under
    the writer lock). Without an index the log is just emptied: a later load reads it all."""
    log = conn.execute("SELECT added, seq FROM temp.lexical_log ORDER BY rowid").fetchall()
    if not log:
        return
    conn.execute("DELETE FROM temp.lexical_log")
    if index is None:
        return
    gone = {seq for added, seq in log if not added}
    last = {seq: added for added, seq in log}
    if gone:
        index.remove(gone)
    added = [seq for seq, was_added in last.items() if was_added]
    for start in range(0, len(added), _CHUNK):
        index.add(_docs(conn, added[start : start + _CHUNK], tokens))


def _docs(conn: sqlite3.Connection, seqs: Sequence[int], tokens: Tokenizer) -> Iterable[LexicalDoc]:
    rows = conn.execute(
        f"SELECT {_ROW}, content, dated FROM memories WHERE seq IN ({','.join('?' * len(seqs))})",
        list(seqs),
    ).fetchall()
    counts = tokens.counts([(r[8], r[9]) for r in rows])
    return [LexicalDoc(IndexRow(*r[:8]), c) for r, c in zip(rows, counts, strict=True)]
