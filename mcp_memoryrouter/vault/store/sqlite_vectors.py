"""Vectors in SQLite: float32 blobs per model, a persisted embedding queue, and the exact
in-memory index the store keeps in step with them."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.vault.rules.date_words import date_words
from mcp_memoryrouter.vault.search.ranking import NEIGHBOUR_GAP_MS
from mcp_memoryrouter.vault.search.rowtable import IndexRow
from mcp_memoryrouter.vault.search.vectors import Pending, VectorIndex


def embedding_text(content: str, date_from: int, date_to: int, before: str | None = None) -> str:
    """What a memory's vector encodes: when it happened, the turn just before it in the same
    conversation (a short answer means little without its question), then what it says."""
    context = f"{before}\n" if before else ""
    return f"{date_words(date_from, date_to)}: {context}{content}"


def enqueue(conn: sqlite3.Connection, model: str | None, seqs: Sequence[int]) -> None:
    if model is not None and seqs:
        conn.executemany(
            "INSERT OR IGNORE INTO embed_queue (seq, model) VALUES (?, ?)",
            [(seq, model) for seq in seqs],
        )


def queued_models(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT DISTINCT model FROM embed_queue")]


def take(
    conn: sqlite3.Connection, model: str, limit: int, ids: Sequence[str] = ()
) -> list[Pending]:
    """Queued rows for ``model``, oldest first; only the memories in ``ids`` when given."""
    among = f"AND m.id IN ({', '.join('?' * len(ids))}) " if ids else ""
    rows = conn.execute(
        "SELECT m.seq, m.vault_id, m.tier, m.importance, m.date_from, m.date_to, m.session_id, "
        "m.content, p.content FROM embed_queue q JOIN memories m ON m.seq = q.seq "
        "LEFT JOIN memories p ON p.seq = m.seq - 1 AND p.vault_id = m.vault_id AND p.tier = 1 "
        "AND m.tier = 1 AND p.session_id IS m.session_id AND abs(p.date_from - m.date_from) <= ? "
        f"WHERE q.model = ? {among}ORDER BY q.seq LIMIT ?",
        (NEIGHBOUR_GAP_MS, model, *ids, limit),
    ).fetchall()
    return [Pending(IndexRow(*r[:7]), embedding_text(r[7], r[4], r[5], r[8])) for r in rows]


def put(
    conn: sqlite3.Connection,
    model: str,
    pending: Sequence[Pending],
    vectors: npt.NDArray[np.float32],
) -> list[int]:
    """Store vectors of rows that still exist and clear them from the queue: the seqs kept."""
    kept = []
    for item, vector in zip(pending, vectors, strict=True):
        cursor = conn.execute(
            "INSERT OR REPLACE INTO vectors (seq, model, vec) "
            "SELECT seq, ?, ? FROM memories WHERE seq = ?",
            (model, vector.astype(np.float32).tobytes(), item.row.seq),
        )
        if cursor.rowcount:
            kept.append(item.row.seq)
    conn.executemany(
        "DELETE FROM embed_queue WHERE model = ? AND seq = ?",
        [(model, item.row.seq) for item in pending],
    )
    return kept


def load_index(conn: sqlite3.Connection, model: str, dim: int) -> VectorIndex:
    index = VectorIndex(dim)
    cursor = conn.execute(
        "SELECT m.seq, m.vault_id, m.tier, m.importance, m.date_from, m.date_to, m.session_id, "
        "v.vec FROM vectors v JOIN memories m ON m.seq = v.seq WHERE v.model = ?",
        (model,),
    )
    while batch := cursor.fetchmany(4096):
        rows = [IndexRow(*r[:7]) for r in batch]
        matrix = np.frombuffer(b"".join(r[7] for r in batch), dtype=np.float32)
        index.add(rows, matrix.reshape(len(batch), dim))
    return index


def pending_count(conn: sqlite3.Connection, vault_id: str) -> int:
    (count,) = conn.execute(
        # CROSS JOIN keeps the queue as the outer loop: the cost follows the queue, not the
        # vault (with a plain JOIN the planner walked every row of the vault).
        "SELECT count(*) FROM embed_queue q CROSS JOIN memories m ON m.seq = q.seq "
        "WHERE m.vault_id = ?",
        (vault_id,),
    ).fetchone()
    return int(count)
