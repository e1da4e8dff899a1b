"""Consolidation in SQL, once for both stores: checkout, commit, imported reflections,
lineage. Each runs inside the caller's transaction (checkout, commit, import) or read
snapshot (lineage, links).

Parallel consolidation never collides. On SQLite one writer runs at a time. On PostgreSQL,
checkout locks the rows it reads with ``FOR UPDATE SKIP LOCKED`` (a row another checkout is
leasing right now is passed over, not waited for), and a commit locks its batch row first,
so concurrent replays of one batch queue up behind it and find it committed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace

from mcp_memoryrouter.db import Tx
from mcp_memoryrouter.errors import InvalidRequest, LeaseExpired, NotFound
from mcp_memoryrouter.tokens import est_tokens
from mcp_memoryrouter.vault.rules import counters, coverage, leases, selection
from mcp_memoryrouter.vault.rules.date_words import date_words
from mcp_memoryrouter.vault.rules.domain import (
    Batch,
    Candidate,
    CommitOutcome,
    Created,
    EmptyCheckout,
    Entry,
    Lineage,
    Mark,
    Memory,
    SourceTier,
    Support,
    Tier,
    Writer,
    new_memory_id,
    reflection_tier,
)
from mcp_memoryrouter.vault.store import current, evidence
from mcp_memoryrouter.vault.store.sql import (
    MEMORY_COLUMNS,
    WRITER_COLUMNS,
    memory_from_row,
    writer_columns,
)

CANDIDATE_FETCH = 256  # candidate rows per read of the checkout cursor
PARENTS_SHOWN = 500  # reflections built from a memory that inspect lists
# A row is free for checkout when it was never leased or its lease ran out by now (the
# parameter): rules/leases.py.
FREE = "(lease_until IS NULL OR lease_until <= ?)"

Source = tuple[str, int, int | None]  # id, tokens, importance
# One page of a reflection's sources, most similar to it first, with each one's cosine (None:
# no vector): how vectors are compared (numpy, or pgvector) is each database's own.
SimilarSources = Callable[
    [Tx, str, Memory, int, int], tuple[tuple[Memory, ...], tuple[float | None, ...]]
]


def apply_counters(tx: Tx, vault_id: str, deltas: counters.Deltas) -> None:
    sql, params = counters.update_statement(deltas, "?")
    tx.run(sql, [*params, vault_id])


def _free_candidates(tx: Tx, vault_id: str, tier: int, now_ms: int) -> Generator[Candidate]:
    # On PostgreSQL the cursor locks rows as it reads them, so only about one fetch beyond
    # the batch stays locked until the transaction ends.
    rows = tx.stream(
        "SELECT id, tokens, importance, date_from, date_to, content FROM memories "
        f"WHERE vault_id = ? AND tier = ? AND consolidated = 0 AND {FREE} "
        f"ORDER BY date_from, id{tx.skip_locked}",
        (vault_id, tier, now_ms),
        CANDIDATE_FETCH,
    )
    try:
        yield from (Candidate(*row) for row in rows)
    finally:
        rows.close()


def checkout(
    tx: Tx,
    vault_id: str,
    tier: SourceTier,
    rule: selection.Selection,
    batch_id: str,
    now_ms: int,
    lease_until_ms: int,
    session_id: str | None,
) -> Batch | EmptyCheckout:
    candidates = _free_candidates(tx, vault_id, tier, now_ms)
    chosen = selection.select(candidates, rule)
    candidates.close()
    if not chosen:
        row = tx.one(
            "SELECT count(*) FROM memories WHERE vault_id = ? AND tier = ? AND consolidated = 0",
            (vault_id, tier),
        )
        return EmptyCheckout(leased=int(row[0]) if row else 0)
    covers_from, covers_to = coverage.coverage(chosen)
    total = sum(c.tokens for c in chosen)
    tx.run(
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
    tx.many(  # each source's line: its place in the checkout's text, what "cites" names
        "INSERT INTO batch_sources (batch_id, memory_id, line) VALUES (?, ?, ?)",
        [(batch_id, c.id, line) for line, c in enumerate(chosen, 1)],
    )
    test, ids = tx.among([c.id for c in chosen])
    tx.run(
        f"UPDATE memories SET lease_batch = ?, lease_until = ? WHERE id {test}",
        [batch_id, lease_until_ms, *ids],
    )
    return Batch(batch_id, tier, total, covers_from, covers_to, lease_until_ms, tuple(chosen))


def _replay(batch_id: str, tier: SourceTier, created_json: str, consolidated: int) -> CommitOutcome:
    created = tuple(
        Created(item["id"], item["importance"], bool(item.get("weak_support")))
        for item in json.loads(created_json)
    )
    return CommitOutcome(
        batch_id, reflection_tier(tier), created, consolidated, already_committed=True
    )


def commit(
    tx: Tx,
    vault_id: str,
    batch_id: str,
    entries: Sequence[Entry],
    now_ms: int,
    embed_model: str | None,
    writer: Writer | None = None,
) -> CommitOutcome:
    row = tx.one(
        "SELECT tier, lease_until, committed_ms, created_json, sources_consolidated, "
        f"covers_from, covers_to FROM batches WHERE id = ? AND vault_id = ?{tx.for_update()}",
        (batch_id, vault_id),
    )
    if row is None:
        raise NotFound("unknown batch_id", {"batch_id": batch_id})
    tier, lease_until_ms, committed_ms, created_json, consolidated, covers_from, covers_to = row
    if committed_ms is not None:
        return _replay(batch_id, tier, created_json, consolidated)
    if not leases.lease_running(lease_until_ms, now_ms):
        raise LeaseExpired(
            "the lease of this batch expired: check out again", {"batch_id": batch_id}
        )
    # The sources this batch still holds, locked: a delete or a checkout racing this commit
    # either finishes first (and the row is not ours any more) or waits for it.
    sources = tx.all(
        "SELECT m.id, m.tokens, m.importance FROM batch_sources b "
        "JOIN memories m ON m.id = b.memory_id "
        f"WHERE b.batch_id = ? AND m.lease_batch = ? ORDER BY m.id{tx.for_update('m')}",
        (batch_id, batch_id),
    )
    target = reflection_tier(tier)
    created = create_reflections(
        tx,
        vault_id,
        target,
        entries,
        [(s[0], s[1], s[2]) for s in sources],
        (covers_from, covers_to),
        batch_id,
        now_ms,
        embed_model,
        writer,
    )
    current.supersede(tx, vault_id, batch_id, entries, created, covers_to)
    tx.run(
        "UPDATE batches SET committed_ms = ?, created_json = ?, sources_consolidated = ? "
        "WHERE id = ? AND vault_id = ?",
        (
            now_ms,
            json.dumps([{"id": c.id, "importance": c.importance} for c in created]),
            len(sources),
            batch_id,
            vault_id,
        ),
    )
    return CommitOutcome(batch_id, target, tuple(created), len(sources), already_committed=False)


def create_reflections(
    tx: Tx,
    vault_id: str,
    target: Tier,
    entries: Sequence[Entry],
    sources: Sequence[Source],
    covers: tuple[int, int],
    batch_id: str | None,
    now_ms: int,
    embed_model: str | None,
    writer: Writer | None,
) -> list[Created]:
    """Insert the reflections as ``writer``'s, link each to every source, mark the sources
    consolidated and move the counters: the part of a commit every way of creating
    reflections shares."""
    created = [Created(new_memory_id(), e.importance) for e in entries]
    tx.many(
        "INSERT INTO memories (id, vault_id, tier, content, tokens, importance, date_from, "
        f"date_to, batch_id, created_ms, dated, sources_total, kind, {WRITER_COLUMNS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                *(c.id, vault_id, target, e.text, est_tokens(e.text), e.importance),
                *(covers[0], covers[1], batch_id, now_ms, date_words(*covers), len(sources)),
                e.kind,
                *writer_columns(writer),
            )
            for c, e in zip(created, entries, strict=True)
        ],
    )
    enqueue(tx, embed_model, [c.id for c in created])
    tx.many(
        "INSERT INTO lineage (parent_id, child_id, vault_id) VALUES (?, ?, ?)",
        [(c.id, s[0], vault_id) for c in created for s in sources],
    )
    if sources:
        test, ids = tx.among([s[0] for s in sources])
        tx.run(
            "UPDATE memories SET consolidated = 1, lease_batch = NULL, lease_until = NULL "
            f"WHERE id {test}",
            ids,
        )
    deltas = counters.after_consolidation(
        target - 1,
        [(s[1], s[2]) for s in sources],
        [(est_tokens(e.text), e.importance) for e in entries],
    )
    apply_counters(tx, vault_id, deltas)
    return created


def enqueue(tx: Tx, model: str | None, ids: Sequence[str]) -> None:
    """Queue these memories for ``model``'s vectors, in the transaction that writes them: a
    crash loses nothing."""
    if model is None or not ids:
        return
    test, params = tx.among(ids)
    tx.run(
        f"INSERT INTO embed_queue (seq, model) SELECT seq, ? FROM memories WHERE id {test} "
        "ON CONFLICT DO NOTHING",
        [model, *params],
    )


def import_reflections(
    tx: Tx,
    vault_id: str,
    target: Tier,
    entries: Sequence[Entry],
    source_ids: Sequence[str],
    covers: tuple[int, int] | None,
    now_ms: int,
    embed_model: str | None,
    writer: Writer | None = None,
) -> list[Created]:
    """Recreate reflections (from an export) with lineage to sources already in the vault,
    as ``writer``'s (the importing key's: an export carries no writers)."""
    test, ids = tx.among(list(source_ids))
    rows = tx.all(
        f"SELECT id, tokens, importance, date_from, date_to, consolidated = 0 AND {FREE} "
        f"FROM memories WHERE {tx.by_key('vault_id')} = ? AND tier = ? AND id {test} "
        "ORDER BY id"
        f"{tx.for_update()}",
        [now_ms, vault_id, target - 1, *ids],
    )
    by_id = {row[0]: row for row in rows}
    taken = [by_id[i] for i in dict.fromkeys(source_ids) if i in by_id]
    for row in taken:
        if not row[5]:
            raise InvalidRequest(
                "a source is already consolidated or leased", {"source_id": row[0]}
            )
    missing = [i for i in source_ids if i not in by_id]
    if missing:
        raise NotFound(f"unknown source id one tier below {target}", {"source_id": missing[0]})
    if covers is None:
        if not taken:
            raise InvalidRequest("give covers when there are no source_ids", {"field": "covers"})
        covers = (min(r[3] for r in taken), max(r[4] for r in taken))
    sources = [(r[0], r[1], r[2]) for r in taken]
    return create_reflections(
        tx, vault_id, target, entries, sources, covers, None, now_ms, embed_model, writer
    )


def links(
    tx: Tx, vault_id: str, parents: Sequence[str], sources: Sequence[str]
) -> list[tuple[str, str]]:
    """(parent, source) lineage pairs with both ends in the given sets."""
    if not parents or not sources:
        return []
    parent_test, parent_ids = tx.among(parents)
    source_test, source_ids = tx.among(sources)
    rows = tx.all(
        "SELECT parent_id, child_id FROM lineage WHERE vault_id = ? "
        f"AND parent_id {parent_test} AND child_id {source_test}",
        [vault_id, *parent_ids, *source_ids],
    )
    return [(r[0], r[1]) for r in rows]


def read_memory(tx: Tx, vault_id: str, memory_id: str) -> Memory:
    row = tx.one(
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ? AND m.vault_id = ?",
        (memory_id, vault_id),
    )
    if row is None:
        raise NotFound("unknown memory_id", {"memory_id": memory_id})
    return memory_from_row(row)


def support(tx: Tx, ids: Sequence[str]) -> dict[str, Support]:
    """How much of each reflection's support among ``ids`` is gone, as kept on the rows:
    (sources linked, sources deleted since)."""
    if not ids:
        return {}
    test, params = tx.among(sorted(set(ids)))
    rows = tx.all(
        f"SELECT id, sources_total, sources_deleted FROM memories WHERE id {test}", params
    )
    return {row[0]: Support(int(row[1]), int(row[2])) for row in rows}


def with_support(tx: Tx, rows: Sequence[Memory]) -> tuple[Memory, ...]:
    """``rows`` with each reflection's :class:`Support` (raw rows unchanged)."""
    found = support(tx, [m.id for m in rows if m.tier > 1])
    return tuple(
        replace(m, support=found.get(m.id, Support(0, 0))) if m.tier > 1 else m for m in rows
    )


def sources_by_date(
    tx: Tx, vault_id: str, memory_id: str, offset: int, limit: int
) -> tuple[Memory, ...]:
    # the reflection's own evidence first, by rank (store/evidence.py), then the rest by date
    rows = tx.all(
        f"SELECT {MEMORY_COLUMNS} FROM lineage l JOIN memories m ON m.id = l.child_id "
        "LEFT JOIN evidence e ON e.vault_id = m.vault_id AND e.reflection_id = l.parent_id "
        "AND e.memory_id = m.id "
        "WHERE l.parent_id = ? AND m.vault_id = ? "
        "ORDER BY CASE WHEN e.rank IS NULL THEN 1 ELSE 0 END, e.rank, m.date_from, m.id "
        "LIMIT ? OFFSET ?",
        (memory_id, vault_id, limit, offset),
    )
    return tuple(map(memory_from_row, rows))


def built_from(tx: Tx, vault_id: str, memory_id: str) -> tuple[Memory, ...]:
    """The reflections built from a memory, oldest first."""
    rows = tx.all(
        f"SELECT {MEMORY_COLUMNS} FROM lineage l JOIN memories m ON m.id = l.parent_id "
        f"WHERE l.child_id = ? AND m.vault_id = ? ORDER BY m.date_from, m.id LIMIT ?",
        (memory_id, vault_id, PARENTS_SHOWN),
    )
    return tuple(map(memory_from_row, rows))


def read_lineage(
    tx: Tx,
    vault_id: str,
    memory_id: str,
    offset: int,
    limit: int,
    similar: SimilarSources | None = None,
) -> Lineage:
    """A memory with a page of its sources (its own evidence first, then by date, or with
    ``similar`` most similar first) and the reflections built from it."""
    [memory] = with_support(tx, [read_memory(tx, vault_id, memory_id)])
    sources: tuple[Memory, ...] = ()
    scores: tuple[float | None, ...] = ()
    total = deleted = 0
    marked: dict[str, Mark] = {}
    if memory.support is not None:  # a reflection: its support, as kept on its row
        total, deleted = memory.support.total, memory.support.deleted
        marked = evidence.marks(tx, vault_id, memory_id)
        if similar is not None and marked:
            everything = similar(tx, vault_id, memory, 0, total)
            sources, scores = evidence.first(*everything, marked, offset, limit)
        elif similar is not None:
            sources, scores = similar(tx, vault_id, memory, offset, limit)
        else:
            sources = sources_by_date(tx, vault_id, memory_id, offset, limit)
    parents = built_from(tx, vault_id, memory_id) if memory.tier < 3 else ()
    sources, parents = with_support(tx, sources), with_support(tx, parents)
    marks = tuple(marked.get(s.id) for s in sources)
    weak = memory.tier > 1 and evidence.weak_support(tx, vault_id, memory)
    return Lineage(memory, sources, total, deleted, parents, scores, marks, len(marked), weak)
