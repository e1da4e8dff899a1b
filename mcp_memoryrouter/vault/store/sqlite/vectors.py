"""Vectors in SQLite: float32 blobs per model, the persisted embedding queue, the in-memory
index loaded from them, and cosines computed with numpy.

A large index is also saved beside the database (:mod:`...search.snapshot`): a start reads
the file, lists the seqs that have a vector now (the ``vectors_seq`` index alone, no blob),
drops the rows whose vector is gone and reads from SQLite only the vectors the file lacks.
A (model, seq) is given a vector once (a model replaced is dropped whole), and deletes
remove the file (the store's ``_forget``), so a seq deleted and reused by another memory
cannot bring back the vector of the first.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.db import Tx
from mcp_memoryrouter.vault.rules.coverage import by_similarity
from mcp_memoryrouter.vault.rules.domain import Memory
from mcp_memoryrouter.vault.search import snapshot
from mcp_memoryrouter.vault.search.ranking import NEIGHBOUR_GAP_MS
from mcp_memoryrouter.vault.search.rowtable import IndexRow
from mcp_memoryrouter.vault.search.vectors import Pending, VectorIndex, embedding_text
from mcp_memoryrouter.vault.store.sql import MEMORY_COLUMNS, memory_from_row, writer_sql

log = logging.getLogger(__name__)
_SNAPSHOT = ".vectors-"  # the database's name, this, and a digest of the model's

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


def snapshot_path(database: str, model: str) -> Path:
    return Path(database + _SNAPSHOT + hashlib.sha256(model.encode()).hexdigest()[:16])


def drop_snapshots(database: str) -> None:
    """Remove every model's saved index of ``database`` (after a delete)."""
    path = Path(database)
    for saved in path.parent.glob(path.name + _SNAPSHOT + "*"):
        saved.unlink(missing_ok=True)


def save_index(index: VectorIndex, path: Path, model: str) -> bool:
    """Save a large index (False when it is not large)."""
    read, changes = index.state(), index.changes
    if read is None:
        return False
    snapshot.write(path, read(), {"model": model, "dim": index.dim})
    index.saved_changes = changes
    return True


def load_index(
    conn: sqlite3.Connection, model: str, dim: int, saved: Path | None = None
) -> VectorIndex:
    """The model's index: from ``saved`` and the vectors it lacks, when it can be read and
    holds most of them; else from every vector."""
    restored = _restored(conn, model, dim, saved) if saved is not None else None
    if restored is None:
        index = VectorIndex(dim)
        index.saved_changes = -1  # never saved: the first fit saves it
        _add(index, conn.execute(f"{_VECTORS} WHERE v.model = ?", (model,)), dim)
        return index
    index, lacking = restored
    for start in range(0, lacking.size, 500):
        seqs = lacking[start : start + 500].tolist()
        marks = ", ".join("?" * len(seqs))
        _add(
            index,
            conn.execute(f"{_VECTORS} WHERE v.model = ? AND v.seq IN ({marks})", [model, *seqs]),
            dim,
        )
    return index


_VECTORS = f"SELECT {_ROW}, v.vec FROM vectors v JOIN memories m ON m.seq = v.seq"


def _add(index: VectorIndex, cursor: sqlite3.Cursor, dim: int) -> None:
    while batch := cursor.fetchmany(4096):
        rows = [IndexRow(*r[:8]) for r in batch]
        matrix = np.frombuffer(b"".join(r[8] for r in batch), dtype=np.float32)
        index.add(rows, matrix.reshape(len(batch), dim))


def _restored(
    conn: sqlite3.Connection, model: str, dim: int, path: Path
) -> tuple[VectorIndex, npt.NDArray[np.int64]] | None:
    """The saved index less the rows whose vector is gone, and the seqs it lacks; None
    when there is no file, it cannot be read, or it lacks most vectors."""
    try:
        saved, meta = snapshot.read(path, room=4096)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError) as exc:
        log.warning("saved vector index not read (%s): loading every vector", type(exc).__name__)
        return None
    if meta.get("model") != model or meta.get("dim") != dim:
        return None
    query = "SELECT seq FROM vectors INDEXED BY vectors_seq WHERE model = ?"
    present = np.fromiter((r[0] for r in conn.execute(query, (model,))), dtype=np.int64)
    seqs = saved.columns["seq"]
    lacking = np.setdiff1d(present, seqs, assume_unique=True)  # both sets of keys
    if lacking.size * 2 > present.size:
        return None
    index = VectorIndex.restored(saved)
    index.remove(np.setdiff1d(seqs, present, assume_unique=True).tolist())
    index.saved_changes = index.changes
    return index, lacking


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
