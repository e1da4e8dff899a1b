"""Consolidation in SQLite: checkout, commit and lineage, each inside the caller's
write transaction (checkout, commit) or read snapshot (lineage)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Generator, Sequence

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.errors import InvalidRequest, LeaseExpired, NotFound
from mcp_memoryrouter.tokens import est_tokens
from mcp_memoryrouter.vault.rules import counters, leases
from mcp_memoryrouter.vault.rules import coverage as lineage
from mcp_memoryrouter.vault.rules import selection as tiers
from mcp_memoryrouter.vault.rules.date_words import date_words
from mcp_memoryrouter.vault.rules.domain import (
    Batch,
    Candidate,
    CommitOutcome,
    Created,
    EmptyCheckout,
    Entry,
    Lineage,
    Memory,
    SourceTier,
    Tier,
    new_memory_id,
)
from mcp_memoryrouter.vault.store.sqlite_rows import MEMORY_COLUMNS, memory_from_row, placeholders


def _free_candidates(
    conn: sqlite3.Connection, vault_id: str, tier: int, now_ms: int
) -> Generator[Candidate, None, None]:
    cursor = conn.execute(
        "SELECT id, tokens, importance, date_from, date_to, content, lease_until "
        "FROM memories WHERE vault_id = ? AND tier = ? AND consolidated = 0 "
        "ORDER BY date_from, id",
        (vault_id, tier),
    )
    try:
        for row in cursor:
            if leases.is_free(row[6], now_ms):
                yield Candidate(row[0], row[1], row[2], row[3], row[4], row[5])
    finally:
        cursor.close()


def checkout(
    conn: sqlite3.Connection,
    vault_id: str,
    tier: SourceTier,
    rule: tiers.Selection,
    batch_id: str,
    now_ms: int,
    lease_until_ms: int,
    session_id: str | None,
) -> Batch | EmptyCheckout:
    candidates = _free_candidates(conn, vault_id, tier, now_ms)
    chosen = tiers.select(candidates, rule)
    candidates.close()
    if not chosen:
        (leased,) = conn.execute(
            "SELECT count(*) FROM memories WHERE vault_id = ? AND tier = ? AND consolidated = 0",
            (vault_id, tier),
        ).fetchone()
        return EmptyCheckout(leased=leased)
    covers_from, covers_to = lineage.coverage(chosen)
    total = sum(c.tokens for c in chosen)
    conn.execute(
        "INSERT INTO batches (id, vault_id, tier, created_ms, lease_until, covers_from, "
        "covers_to, est_tokens, session_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            batch_id,
            vault_id,
            tier,
            now_ms,
            lease_until_ms,
            covers_from,
            covers_to,
            total,
            session_id,
        ),
    )
    conn.executemany(
        "INSERT INTO batch_sources (batch_id, memory_id) VALUES (?, ?)",
        [(batch_id, c.id) for c in chosen],
    )
    conn.executemany(
        "UPDATE memories SET lease_batch = ?, lease_until = ? WHERE id = ?",
        [(batch_id, lease_until_ms, c.id) for c in chosen],
    )
    return Batch(batch_id, tier, total, covers_from, covers_to, lease_until_ms, tuple(chosen))


def _replay(batch_id: str, tier: int, created_json: str, consolidated: int) -> CommitOutcome:
    created = tuple(Created(item["id"], item["importance"]) for item in json.loads(created_json))
    target: Tier = 2 if tier == 1 else 3
    return CommitOutcome(batch_id, target, created, consolidated, already_committed=True)


def commit(
    conn: sqlite3.Connection,
    vault_id: str,
    batch_id: str,
    entries: Sequence[Entry],
    now_ms: int,
    embed_model: str | None,
) -> CommitOutcome:
    row = conn.execute(
        "SELECT tier, lease_until, committed_ms, created_json, sources_consolidated, "
        "covers_from, covers_to FROM batches WHERE id = ? AND vault_id = ?",
        (batch_id, vault_id),
    ).fetchone()
    if row is None:
        raise NotFound("unknown batch_id", {"batch_id": batch_id})
    tier, lease_until_ms, committed_ms, created_json, consolidated, covers_from, covers_to = row
    if committed_ms is not None:
        return _replay(batch_id, tier, created_json, consolidated)
    if not leases.lease_running(lease_until_ms, now_ms):
        raise LeaseExpired(
            "the lease of this batch expired: check out again", {"batch_id": batch_id}
        )
    sources = conn.execute(
        "SELECT m.id, m.tokens, m.importance FROM batch_sources b "
        "JOIN memories m ON m.id = b.memory_id "
        "WHERE b.batch_id = ? AND m.lease_batch = ?",
        (batch_id, batch_id),
    ).fetchall()
    target: Tier = 2 if tier == 1 else 3
    created = _create_reflections(
        conn,
        vault_id,
        target,
        entries,
        sources,
        (covers_from, covers_to),
        batch_id,
        now_ms,
        embed_model,
    )
    conn.execute(
        "UPDATE batches SET committed_ms = ?, created_json = ?, sources_consolidated = ? "
        "WHERE id = ?",
        (
            now_ms,
            json.dumps([{"id": c.id, "importance": c.importance} for c in created]),
            len(sources),
            batch_id,
        ),
    )
    return CommitOutcome(batch_id, target, tuple(created), len(sources), already_committed=False)


def _create_reflections(
    conn: sqlite3.Connection,
    vault_id: str,
    target: Tier,
    entries: Sequence[Entry],
    sources: Sequence[tuple[str, int, int | None]],
    covers: tuple[int, int],
    batch_id: str | None,
    now_ms: int,
    embed_model: str | None,
) -> list[Created]:
    """Insert the reflections, link each to every source, mark the sources consolidated and
    move the counters: the part of a commit every way of creating reflections shares."""
    created = [Created(new_memory_id(), e.importance) for e in entries]
    conn.executemany(
        "INSERT INTO memories (id, vault_id, tier, content, tokens, importance, date_from, "
        "date_to, batch_id, created_ms, dated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                c.id,
                vault_id,
                target,
                e.text,
                est_tokens(e.text),
                e.importance,
                covers[0],
                covers[1],
                batch_id,
                now_ms,
                date_words(*covers),
            )
            for c, e in zip(created, entries, strict=True)
        ],
    )
    if embed_model is not None:  # queued in the same transaction: a crash loses nothing
        conn.executemany(
            "INSERT OR IGNORE INTO embed_queue (seq, model) SELECT seq, ? FROM memories "
            "WHERE id = ?",
            [(embed_model, c.id) for c in created],
        )
    conn.executemany(
        "INSERT INTO lineage (parent_id, child_id, vault_id) VALUES (?, ?, ?)",
        [(c.id, s[0], vault_id) for c in created for s in sources],
    )
    conn.executemany(
        "UPDATE memories SET consolidated = 1, lease_batch = NULL, lease_until = NULL WHERE id = ?",
        [(s[0],) for s in sources],
    )
    deltas = counters.after_consolidation(
        target - 1,
        [(s[1], s[2]) for s in sources],
        [(est_tokens(e.text), e.importance) for e in entries],
    )
    sql, params = counters.update_statement(deltas, "?")
    conn.execute(sql, [*params, vault_id])
    return created


def import_reflections(
    conn: sqlite3.Connection,
    vault_id: str,
    target: Tier,
    entries: Sequence[Entry],
    source_ids: Sequence[str],
    covers: tuple[int, int] | None,
    now_ms: int,
    embed_model: str | None,
) -> list[Created]:
    """Recreate reflections (from an export) with lineage to sources already in the vault."""
    sources: list[tuple[str, int, int | None]] = []
    windows: list[tuple[int, int]] = []
    for start in range(0, len(source_ids), 400):
        chunk = list(source_ids[start : start + 400])
        rows = conn.execute(
            "SELECT id, tokens, importance, date_from, date_to, consolidated, lease_until "
            f"FROM memories WHERE vault_id = ? AND tier = ? AND id IN ({placeholders(len(chunk))})",
            [vault_id, target - 1, *chunk],
        ).fetchall()
        for row in rows:
            if row[5] or not leases.is_free(row[6], now_ms):
                raise InvalidRequest(
                    "a source is already consolidated or leased", {"source_id": row[0]}
                )
            sources.append((row[0], row[1], row[2]))
            windows.append((row[3], row[4]))
    if len(sources) != len(set(source_ids)):
        found = {s[0] for s in sources}
        missing = next(i for i in source_ids if i not in found)
        raise NotFound(f"unknown source id one tier below {target}", {"source_id": missing})
    if covers is None:
        if not windows:
            raise InvalidRequest("give covers when there are no source_ids", {"field": "covers"})
        covers = (min(w[0] for w in windows), max(w[1] for w in windows))
    return _create_reflections(
        conn, vault_id, target, entries, sources, covers, None, now_ms, embed_model
    )


def links(
    conn: sqlite3.Connection, vault_id: str, parents: Sequence[str], sources: Sequence[str]
) -> list[tuple[str, str]]:
    """(parent, source) lineage pairs with both ends in the given sets."""
    if not parents or not sources:
        return []
    rows = conn.execute(
        "SELECT parent_id, child_id FROM lineage WHERE vault_id = ? "
        f"AND parent_id IN ({placeholders(len(parents))}) "
        f"AND child_id IN ({placeholders(len(sources))})",
        [vault_id, *parents, *sources],
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def _similar_sources(
    conn: sqlite3.Connection, vault_id: str, memory: Memory, model: str, offset: int, limit: int
) -> tuple[tuple[Memory, ...], tuple[float | None, ...]]:
    """One page of sources, most similar to ``memory`` in ``model``'s space first."""
    rows = conn.execute(
        f"SELECT {MEMORY_COLUMNS}, v.vec FROM lineage l JOIN memories m ON m.id = l.child_id "
        "LEFT JOIN vectors v ON v.seq = m.seq AND v.model = ? "
        "WHERE l.parent_id = ? AND m.vault_id = ?",
        (model, memory.id, vault_id),
    ).fetchall()
    own = conn.execute(
        "SELECT v.vec FROM vectors v JOIN memories m ON m.seq = v.seq "
        "WHERE m.id = ? AND m.vault_id = ? AND v.model = ?",
        (memory.id, vault_id, model),
    ).fetchone()
    target = None if own is None else np.frombuffer(own[0], dtype=np.float32)
    scored = [(memory_from_row(r[:-1]), _cosine(target, r[-1])) for r in rows]
    page = lineage.by_similarity(scored)[offset : offset + limit]
    return tuple(m for m, _ in page), tuple(s for _, s in page)


def _cosine(target: npt.NDArray[np.float32] | None, blob: bytes | None) -> float | None:
    if target is None or blob is None:
        return None
    vector = np.frombuffer(blob, dtype=np.float32)
    norms = float(np.linalg.norm(target) * np.linalg.norm(vector))
    if vector.shape != target.shape or norms == 0.0:
        return None
    return float(np.dot(target, vector)) / norms


def read_lineage(
    conn: sqlite3.Connection,
    vault_id: str,
    memory_id: str,
    offset: int,
    limit: int,
    similar_in: str | None = None,
) -> Lineage:
    row = conn.execute(
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ? AND m.vault_id = ?",
        (memory_id, vault_id),
    ).fetchone()
    if row is None:
        raise NotFound("unknown memory_id", {"memory_id": memory_id})
    memory = memory_from_row(row)
    result = Lineage(memory=memory)
    if memory.tier > 1:
        (total,) = conn.execute(
            "SELECT count(*) FROM lineage WHERE parent_id = ?", (memory_id,)
        ).fetchone()
        (present,) = conn.execute(
            "SELECT count(*) FROM lineage l JOIN memories m ON m.id = l.child_id "
            "WHERE l.parent_id = ? AND m.vault_id = ?",
            (memory_id, vault_id),
        ).fetchone()
        scores: tuple[float | None, ...] = ()
        if similar_in is not None:
            sources, scores = _similar_sources(conn, vault_id, memory, similar_in, offset, limit)
        else:
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM lineage l JOIN memories m ON m.id = l.child_id "
                "WHERE l.parent_id = ? AND m.vault_id = ? ORDER BY m.date_from, m.id "
                "LIMIT ? OFFSET ?",
                (memory_id, vault_id, limit, offset),
            ).fetchall()
            sources = tuple(map(memory_from_row, rows))
        result = Lineage(memory, sources, total, total - present, scores=scores)
    if memory.tier < 3:
        parents = conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM lineage l JOIN memories m ON m.id = l.parent_id "
            "WHERE l.child_id = ? AND m.vault_id = ? ORDER BY m.date_from, m.id LIMIT 500",
            (memory_id, vault_id),
        ).fetchall()
        result = Lineage(
            memory,
            result.sources,
            result.sources_total,
            result.sources_deleted,
            tuple(map(memory_from_row, parents)),
            result.scores,
        )
    return result
