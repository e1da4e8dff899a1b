"""Each entry's own evidence in SQL, once for both stores (the rule is
``rules/evidence.py``; docs/consolidation.md, "Each entry's own evidence").

A commit is recorded in two transactions: the commit itself (``reflect.commit``), then, once
the sources are scored outside any transaction, :func:`record` writes the evidence rows and
each created reflection's weak flag into the batch's ``created_json``, the answer a replay
reads. An item of ``created_json`` that carries ``weak_support`` marks the batch recorded,
so a replay, or two replays at once (the batch row is locked first), records nothing twice;
a commit whose second transaction never ran is recorded by its next replay.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.db import Tx
from mcp_memoryrouter.vault.rules.domain import Mark, Memory
from mcp_memoryrouter.vault.rules.evidence import Evidence

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Source:
    """A source of a committed batch: its line, text and dates, and its stored vector in the
    model asked for (None: not embedded yet, or no model)."""

    id: str
    line: int | None
    content: str
    date_from: int
    date_to: int
    vector: Vector | None


@dataclass(frozen=True)
class Unrecorded:
    """A committed batch whose evidence is not recorded yet: the reflections it created (in
    the order of the entries), what they cover, and the sources they were built from."""

    created: tuple[tuple[str, str], ...]  # (id, text) of each reflection still there
    covers: tuple[int, int]
    sources: tuple[Source, ...]


def batch_lines(tx: Tx, vault_id: str, batch_id: str) -> int | None:
    """How many lines the batch's checkout text held (None: no such batch of the vault)."""
    row = tx.one(
        "SELECT count(s.memory_id), max(s.line) FROM batches b "
        "JOIN batch_sources s ON s.batch_id = b.id WHERE b.id = ? AND b.vault_id = ?",
        (batch_id, vault_id),
    )
    if row is None or not row[0]:
        return None
    return int(row[1] if row[1] is not None else row[0])


def unrecorded(tx: Tx, vault_id: str, batch_id: str, model: str | None) -> Unrecorded | None:
    """The committed batch, when its evidence is still to be recorded, with the vectors of
    its sources in ``model`` where they are stored."""
    row = tx.one(
        "SELECT created_json, covers_from, covers_to FROM batches "
        "WHERE id = ? AND vault_id = ? AND committed_ms IS NOT NULL",
        (batch_id, vault_id),
    )
    if row is None or _recorded(json.loads(row[0])):
        return None
    ids = [item["id"] for item in json.loads(row[0])]
    test, params = tx.among(ids)
    texts: dict[str, str] = dict(
        tx.all(
            f"SELECT id, content FROM memories WHERE {tx.by_key('vault_id')} = ? AND id {test}",
            [vault_id, *params],
        )
    )
    created = tuple((i, texts[i]) for i in ids if i in texts)
    rows = tx.all(
        "SELECT m.id, s.line, m.content, m.date_from, m.date_to, v.vec FROM batch_sources s "
        "JOIN memories m ON m.id = s.memory_id "
        "LEFT JOIN vectors v ON v.seq = m.seq AND v.model = ? "
        "WHERE s.batch_id = ? AND m.vault_id = ? AND EXISTS (SELECT 1 FROM lineage l "
        f"WHERE l.vault_id = ? AND l.child_id = m.id AND l.parent_id {test}) "
        "ORDER BY s.line, m.id",
        [model or "", batch_id, vault_id, vault_id, *params],
    )
    sources = tuple(Source(r[0], r[1], r[2], r[3], r[4], _vector(r[5])) for r in rows)
    return Unrecorded(created, (int(row[1]), int(row[2])), sources)


def record(
    tx: Tx,
    vault_id: str,
    batch_id: str,
    found: Mapping[str, Sequence[Evidence]],
    weak: Mapping[str, bool],
) -> dict[str, bool]:
    """Write each reflection's evidence and weak flag, unless a replay did already: the
    weak flag of each reflection created, as recorded."""
    row = tx.one(
        f"SELECT created_json FROM batches WHERE id = ? AND vault_id = ?{tx.for_update()}",
        (batch_id, vault_id),
    )
    if row is None:
        return {}
    items: list[dict[str, Any]] = json.loads(row[0])
    if not _recorded(items):
        live = _present(tx, [*found, *(e.memory_id for kept in found.values() for e in kept)])
        tx.many(
            "INSERT INTO evidence (reflection_id, memory_id, vault_id, rank, score, cited) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [
                (reflection, e.memory_id, vault_id, e.rank, e.score, int(e.cited))
                for reflection, kept in found.items()
                if reflection in live
                for e in kept
                if e.memory_id in live
            ],
        )
        items = [{**item, "weak_support": weak.get(item["id"], False)} for item in items]
        tx.run(
            "UPDATE batches SET created_json = ? WHERE id = ? AND vault_id = ?",
            (json.dumps(items), batch_id, vault_id),
        )
    return {item["id"]: bool(item.get("weak_support")) for item in items}


def marks(tx: Tx, vault_id: str, reflection_id: str) -> dict[str, Mark]:
    """The reflection's evidence still in the vault, by source id."""
    rows = tx.all(
        "SELECT e.memory_id, e.rank, e.score, e.cited FROM evidence e "
        "JOIN memories m ON m.id = e.memory_id AND m.vault_id = e.vault_id "
        "WHERE e.vault_id = ? AND e.reflection_id = ? ORDER BY e.rank",
        (vault_id, reflection_id),
    )
    return {r[0]: Mark(int(r[1]), float(r[2]), bool(r[3])) for r in rows}


def weak_support(tx: Tx, vault_id: str, memory: Memory) -> bool:
    """Whether the reflection was flagged weakly supported when its batch was committed."""
    if memory.batch_id is None:
        return False
    row = tx.one(
        "SELECT created_json FROM batches WHERE id = ? AND vault_id = ?",
        (memory.batch_id, vault_id),
    )
    items = json.loads(row[0]) if row is not None and row[0] else []
    return any(item["id"] == memory.id and item.get("weak_support") for item in items)


def _recorded(items: Sequence[Mapping[str, Any]]) -> bool:
    return any("weak_support" in item for item in items)


def _present(tx: Tx, ids: Sequence[str]) -> set[str]:
    if not ids:
        return set()
    test, params = tx.among(sorted(set(ids)))
    return {r[0] for r in tx.all(f"SELECT id FROM memories WHERE id {test}", params)}


def _vector(value: object) -> Vector | None:
    """A stored vector: SQLite keeps float32 bytes, PostgreSQL's ``vector`` reads as text."""
    if value is None:
        return None
    if isinstance(value, bytes | memoryview):
        return np.frombuffer(bytes(value), dtype=np.float32)
    return np.asarray(json.loads(str(value)), dtype=np.float32)


def first(
    sources: Sequence[Memory],
    scores: Sequence[float | None],
    marked: Mapping[str, Mark],
    offset: int,
    limit: int,
) -> tuple[tuple[Memory, ...], tuple[float | None, ...]]:
    """One page of a reflection's sources in their order (by similarity), its own evidence
    moved first by rank."""
    paired = list(zip(sources, scores, strict=True))
    ranked = sorted((p for p in paired if p[0].id in marked), key=lambda p: marked[p[0].id].rank)
    page = [*ranked, *(p for p in paired if p[0].id not in marked)][offset : offset + limit]
    return tuple(m for m, _ in page), tuple(x for _, x in page)
