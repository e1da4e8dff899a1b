"""Consolidation in PostgreSQL: checkout, commit and lineage, each inside the caller's
transaction.

Parallel workers on any number of replicas never collide: checkout locks the rows it reads
with ``FOR UPDATE SKIP LOCKED`` (a row another checkout is leasing right now is skipped, not
waited for), and a commit locks its batch row ``FOR UPDATE`` first, so concurrent replays of
one batch queue up behind it and find it committed.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from typing import Any

import psycopg

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
from mcp_memoryrouter.vault.store.postgres_rows import MEMORY_COLUMNS
from mcp_memoryrouter.vault.store.sqlite_rows import memory_from_row

Conn = psycopg.Connection[tuple[Any, ...]]
_FETCH = 256  # candidate rows per round trip of the checkout cursor


def _free_candidates(
    conn: Conn, vault_id: str, tier: int, now_ms: int, batch_id: str
) -> Generator[Candidate, None, None]:
    # A server-side cursor locks rows as it fetches them, so only about one fetch beyond the
    # batch is held until the transaction ends.
    with conn.cursor(name=f"checkout_{batch_id}", scrollable=False) as cursor:
        cursor.itersize = _FETCH
        cursor.execute(
            "SELECT id, tokens, importance, date_from, date_to, content FROM memories "
            "WHERE vault_id = %s AND tier = %s AND consolidated = 0 "
            "AND (lease_until IS NULL OR lease_until <= %s) "
            "ORDER BY date_from, id FOR UPDATE SKIP LOCKED",
            (vault_id, tier, now_ms),
        )
        for row in cursor:
            yield Candidate(row[0], row[1], row[2], row[3], row[4], row[5])


def checkout(
    conn: Conn,
    vault_id: str,
    tier: SourceTier,
    rule: tiers.Selection,
    batch_id: str,
    now_ms: int,
    lease_until_ms: int,
    session_id: str | None,
) -> Batch | EmptyCheckout:
    candidates = _free_candidates(conn, vault_id, tier, now_ms, batch_id)
    chosen = tiers.select(candidates, rule)
    candidates.close()
    if not chosen:
        row = conn.execute(
            "SELECT count(*) FROM memories WHERE vault_id = %s AND tier = %s AND consolidated = 0",
            (vault_id, tier),
        ).fetchone()
        return EmptyCheckout(leased=int(row[0]) if row else 0)
    covers_from, covers_to = lineage.coverage(chosen)
    total = sum(c.tokens for c in chosen)
    ids = [c.id for c in chosen]
    conn.execute(
        "INSERT INTO batches (id, vault_id, tier, created_ms, lease_until, covers_from, "
        "covers_to, est_tokens, session_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
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
    conn.execute(
        "INSERT INTO batch_sources (batch_id, memory_id) SELECT %s, unnest(%s::text[])",
        (batch_id, ids),
    )
    conn.execute(
        "UPDATE memories SET lease_batch = %s, lease_until = %s WHERE id = ANY(%s)",
        (batch_id, lease_until_ms, ids),
    )
    return Batch(batch_id, tier, total, covers_from, covers_to, lease_until_ms, tuple(chosen))


def _replay(batch_id: str, tier: int, created_json: str, consolidated: int) -> CommitOutcome:
    created = tuple(Created(item["id"], item["importance"]) for item in json.loads(created_json))
    target: Tier = 2 if tier == 1 else 3
    return CommitOutcome(batch_id, target, created, consolidated, already_committed=True)


def commit(
    conn: Conn,
    vault_id: str,
    batch_id: str,
    entries: Sequence[Entry],
    now_ms: int,
    embed_model: str | None,
) -> CommitOutcome:
    row = conn.execute(
        "SELECT tier, lease_until, committed_ms, created_json, sources_consolidated, "
        "covers_from, covers_to FROM batches WHERE id = %s AND vault_id = %s FOR UPDATE",
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
    # Lock the sources still held by this batch: a delete or a checkout racing this commit
    # either finishes first (and the row is not ours any more) or waits for us.
    sources = conn.execute(
        "SELECT m.id, m.tokens, m.importance FROM batch_sources b "
        "JOIN memories m ON m.id = b.memory_id "
        "WHERE b.batch_id = %s AND m.lease_batch = %s ORDER BY m.id FOR UPDATE OF m",
        (batch_id, batch_id),
    ).fetchall()
    target: Tier = 2 if tier == 1 else 3
    created = _create_reflections(
        conn,
        vault_id,
        target,
        entries,
        [(s[0], s[1], s[2]) for s in sources],
        (covers_from, covers_to),
        batch_id,
        now_ms,
        embed_model,
    )
    conn.execute(
        "UPDATE batches SET committed_ms = %s, created_json = %s, sources_consolidated = %s "
        "WHERE id = %s",
        (
            now_ms,
            json.dumps([{"id": c.id, "importance": c.importance} for c in created]),
            len(sources),
            batch_id,
        ),
    )
    return CommitOutcome(batch_id, target, tuple(created), len(sources), already_committed=False)


def _create_reflections(
    conn: Conn,
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
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO memories (id, vault_id, tier, content, tokens, importance, date_from, "
            "date_to, batch_id, created_ms, dated) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
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
        conn.execute(
            "INSERT INTO embed_queue (seq, model) SELECT seq, %s FROM memories "
            "WHERE id = ANY(%s) ON CONFLICT DO NOTHING",
            (embed_model, [c.id for c in created]),
        )
    source_ids = [s[0] for s in sources]
    conn.execute(
        "INSERT INTO lineage (parent_id, child_id, vault_id) "
        "SELECT p, c, %s FROM unnest(%s::text[]) p CROSS JOIN unnest(%s::text[]) c",
        (vault_id, [c.id for c in created], source_ids),
    )
    conn.execute(
        "UPDATE memories SET consolidated = 1, lease_batch = NULL, lease_until = NULL "
        "WHERE id = ANY(%s)",
        (source_ids,),
    )
    deltas = counters.after_consolidation(
        target - 1,
        [(s[1], s[2]) for s in sources],
        [(est_tokens(e.text), e.importance) for e in entries],
    )
    sql, params = counters.update_statement(deltas, "%s")
    conn.execute(sql, [*params, vault_id])
    return created


def import_reflections(
    conn: Conn,
    vault_id: str,
    target: Tier,
    entries: Sequence[Entry],
    source_ids: Sequence[str],
    covers: tuple[int, int] | None,
    now_ms: int,
    embed_model: str | None,
) -> list[Created]:
    """Recreate reflections (from an export) with lineage to sources already in the vault."""
    rows = conn.execute(
        "SELECT id, tokens, importance, date_from, date_to, consolidated, lease_until "
        "FROM memories WHERE vault_id = %s AND tier = %s AND id = ANY(%s) "
        "ORDER BY id FOR UPDATE",
        (vault_id, target - 1, list(source_ids)),
    ).fetchall()
    by_id = {row[0]: row for row in rows}
    sources: list[tuple[str, int, int | None]] = []
    windows: list[tuple[int, int]] = []
    for source_id in dict.fromkeys(source_ids):
        row = by_id.get(source_id)
        if row is None:
            continue
        if row[5] or not leases.is_free(row[6], now_ms):
            raise InvalidRequest(
                "a source is already consolidated or leased", {"source_id": row[0]}
            )
        sources.append((row[0], row[1], row[2]))
        windows.append((row[3], row[4]))
    if len(sources) != len(set(source_ids)):
        missing = next(i for i in source_ids if i not in by_id)
        raise NotFound(f"unknown source id one tier below {target}", {"source_id": missing})
    if covers is None:
        if not windows:
            raise InvalidRequest("give covers when there are no source_ids", {"field": "covers"})
        covers = (min(w[0] for w in windows), max(w[1] for w in windows))
    return _create_reflections(
        conn, vault_id, target, entries, sources, covers, None, now_ms, embed_model
    )


def links(
    conn: Conn, vault_id: str, parents: Sequence[str], sources: Sequence[str]
) -> list[tuple[str, str]]:
    """(parent, source) lineage pairs with both ends in the given sets."""
    if not parents or not sources:
        return []
    rows = conn.execute(
        "SELECT parent_id, child_id FROM lineage WHERE vault_id = %s "
        "AND parent_id = ANY(%s) AND child_id = ANY(%s)",
        (vault_id, list(parents), list(sources)),
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def _similar_sources(
    conn: Conn, vault_id: str, memory_id: str, model: str, offset: int, limit: int
) -> tuple[tuple[Memory, ...], tuple[float | None, ...]]:
    """One page of sources, most similar to the memory in ``model``'s space first (cosine;
    NULL for a source, or a memory, without a vector of that dimension)."""
    rows = conn.execute(
        f"SELECT {MEMORY_COLUMNS}, CASE WHEN vector_dims(v.vec) = vector_dims(own.vec) "
        "THEN 1 - (v.vec <=> own.vec) END AS score "
        "FROM lineage l JOIN memories m ON m.id = l.child_id "
        "LEFT JOIN vectors v ON v.seq = m.seq AND v.model = %s "
        "LEFT JOIN (SELECT pv.vec FROM vectors pv JOIN memories p ON p.seq = pv.seq "
        "WHERE p.id = %s AND p.vault_id = %s AND pv.model = %s) own ON true "
        "WHERE l.parent_id = %s AND m.vault_id = %s "
        "ORDER BY score DESC NULLS LAST, m.date_from, m.id LIMIT %s OFFSET %s",
        (model, memory_id, vault_id, model, memory_id, vault_id, limit, offset),
    ).fetchall()
    return (
        tuple(memory_from_row(r[:-1]) for r in rows),
        tuple(None if r[-1] is None else float(r[-1]) for r in rows),
    )


def read_lineage(
    conn: Conn,
    vault_id: str,
    memory_id: str,
    offset: int,
    limit: int,
    similar_in: str | None = None,
) -> Lineage:
    row = conn.execute(
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = %s AND m.vault_id = %s",
        (memory_id, vault_id),
    ).fetchone()
    if row is None:
        raise NotFound("unknown memory_id", {"memory_id": memory_id})
    memory = memory_from_row(row)
    result = Lineage(memory=memory)
    if memory.tier > 1:
        counts = conn.execute(
            "SELECT count(*), count(m.id) FROM lineage l "
            "LEFT JOIN memories m ON m.id = l.child_id AND m.vault_id = %s "
            "WHERE l.parent_id = %s",
            (vault_id, memory_id),
        ).fetchone()
        total, present = (int(counts[0]), int(counts[1])) if counts else (0, 0)
        scores: tuple[float | None, ...] = ()
        if similar_in is not None:
            sources, scores = _similar_sources(conn, vault_id, memory_id, similar_in, offset, limit)
        else:
            rows = conn.execute(
                f"SELECT {MEMORY_COLUMNS} FROM lineage l JOIN memories m ON m.id = l.child_id "
                "WHERE l.parent_id = %s AND m.vault_id = %s ORDER BY m.date_from, m.id "
                "LIMIT %s OFFSET %s",
                (memory_id, vault_id, limit, offset),
            ).fetchall()
            sources = tuple(map(memory_from_row, rows))
        result = Lineage(memory, sources, total, total - present, scores=scores)
    if memory.tier < 3:
        parents = conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM lineage l JOIN memories m ON m.id = l.parent_id "
            "WHERE l.child_id = %s AND m.vault_id = %s ORDER BY m.date_from, m.id LIMIT 500",
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
