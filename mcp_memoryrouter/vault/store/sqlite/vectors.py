"""Vectors in SQLite: float32 blobs per model, the persisted embedding queue, the in-memory
index loaded from them, and cosines computed with numpy."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.db import Tx
from mcp_memoryrouter.vault.rules.coverage import by_similarity
from mcp_memoryrouter.vault.rules.domain import Memory
from mcp_memoryrouter.vault.search.ranking import NEIGHBOUR_GAP_MS
from mcp_memoryrouter.vault.search.rowtable import IndexRow
from mcp_memoryrouter.vault.search.vectors import Pending, VectorIndex, embedding_text
from mcp_memoryrouter.vault.store.sql import MEMORY_COLUMNS, memory_from_row, writer_sql

# What the in-memory index keeps of a row (``IndexRow``), read under the alias ``m``.
_ROW = (
    "m.seq, m.vault_id, m.tier, m.importance, m.date_from, m.date_to, m.session_id, "
    + writer_sql("m.")
)


def take(tx: Tx, model: str, limit: int, ids: Sequence[str] = ()) -> list[Pending]:
    """Queued rows for ``model``, oldest first; only the memories in ``ids`` when given."""
    test, among = tx.among(ids)
    rows = tx.all(
        f"SELECT {_ROW}, m.content, p.content FROM embed_queue q JOIN memories m ON m.seq = q.seq "
        # the turn just before, in the same conversation (see search.ranking.NEIGHBOUR_GAP_MS)
        "LEFT JOIN memories p ON p.seq = m.seq - 1 AND p.vault_id = m.vault_id AND p.tier = 1 "
        "AND m.tier = 1 AND p.session_id IS m.session_id AND abs(p.date_from - m.date_from) <= ? "
        f"WHERE q.model = ? {f'AND m.id {test} ' if ids else ''}ORDER BY q.seq LIMIT ?",
        (NEIGHBOUR_GAP_MS, model, *among, limit),
    )
    return [Pending(IndexRow(*r[:8]), embedding_text(r[8], r[4], r[5], r[9])) for r in rows]


def put(
    tx: Tx, model: str, pending: Sequence[Pending], vectors: npt.NDArray[np.float32]
) -> list[int]:
    """Store vectors of rows that still exist and clear them from the queue: the seqs kept."""
    kept = []
    for item, vector in zip(pending, vectors, strict=True):
        if tx.run(
            "INSERT OR REPLACE INTO vectors (seq, model, vec) "
            "SELECT seq, ?, ? FROM memories WHERE seq = ?",
            (model, vector.astype(np.float32).tobytes(), item.row.seq),
        ):
            kept.append(item.row.seq)
    tx.many(
        "DELETE FROM embed_queue WHERE model = ? AND seq = ?",
        [(model, item.row.seq) for item in pending],
    )
    return kept


def load_index(conn: sqlite3.Connection, model: str, dim: int) -> VectorIndex:
    index = VectorIndex(dim)
    cursor = conn.execute(
        f"SELECT {_ROW}, v.vec FROM vectors v JOIN memories m ON m.seq = v.seq WHERE v.model = ?",
        (model,),
    )
    while batch := cursor.fetchmany(4096):
        rows = [IndexRow(*r[:8]) for r in batch]
        matrix = np.frombuffer(b"".join(r[8] for r in batch), dtype=np.float32)
        index.add(rows, matrix.reshape(len(batch), dim))
    return index


def similar_sources(
    tx: Tx, vault_id: str, memory: Memory, model: str, offset: int, limit: int
) -> tuple[tuple[Memory, ...], tuple[float | None, ...]]:
    """One page of a reflection's sources, most similar to it in ``model``'s space first."""
    rows = tx.all(
        f"SELECT {MEMORY_COLUMNS}, v.vec FROM lineage l JOIN memories m ON m.id = l.child_id "
        "LEFT JOIN vectors v ON v.seq = m.seq AND v.model = ? "
        "WHERE l.parent_id = ? AND m.vault_id = ?",
        (model, memory.id, vault_id),
    )
    own = tx.one(
        "SELECT v.vec FROM vectors v JOIN memories m ON m.seq = v.seq "
        "WHERE m.id = ? AND m.vault_id = ? AND v.model = ?",
        (memory.id, vault_id, model),
    )
    target = None if own is None else np.frombuffer(own[0], dtype=np.float32)
    scored = [(memory_from_row(r[:-1]), _cosine(target, r[-1])) for r in rows]
    page = by_similarity(scored)[offset : offset + limit]
    return tuple(m for m, _ in page), tuple(s for _, s in page)


def _cosine(target: npt.NDArray[np.float32] | None, blob: bytes | None) -> float | None:
    if target is None or blob is None:
        return None
    vector = np.frombuffer(blob, dtype=np.float32)
    norms = float(np.linalg.norm(target) * np.linalg.norm(vector))
    if vector.shape != target.shape or norms == 0.0:
        return None
    return float(np.dot(target, vector)) / norms
