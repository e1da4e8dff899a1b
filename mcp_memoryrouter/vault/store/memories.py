"""Raw memories, deletion and totals in SQL, once for both stores; each runs inside the
caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mcp_memoryrouter.db import Row, Tx
from mcp_memoryrouter.vault.rules import counters, timeline
from mcp_memoryrouter.vault.rules.date_words import date_words
from mcp_memoryrouter.vault.rules.domain import (
    Backlog,
    Counters,
    Derived,
    NewRaw,
    Stats,
    TierTotals,
    Writer,
)
from mcp_memoryrouter.vault.store import reflect
from mcp_memoryrouter.vault.store.sql import WRITER_COLUMNS, writer_columns, writer_from_row

# The per-vault counters (rules/counters.py): totals per tier, then the debt.
COUNTERS = (
    "n1", "tok1", "n2", "tok2", "imp2", "n3", "tok3", "imp3",
    "raw_units", "raw_tokens", "t2_count", "t2_importance", "t2_tokens",
)  # fmt: skip


def ingest(
    tx: Tx, vault_id: str, rows: Sequence[NewRaw], model: str | None, writer: Writer | None
) -> tuple[list[str], int, int]:
    """Store new rows as ``writer``'s, skip duplicates (a duplicate keeps its first writer),
    queue new rows for ``model``: (ids in input order, stored, stored tokens)."""
    ids: list[str] = []
    new: list[str] = []
    tokens = 0
    stored_by = writer_columns(writer)
    for row in rows:
        inserted = tx.run(
            "INSERT INTO memories (id, vault_id, tier, role, content, tokens, date_from, "
            f"date_to, session_id, dedup, created_ms, dated, {WRITER_COLUMNS}) "
            "VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                *(row.id, vault_id, row.role, row.content, row.tokens, row.date_ms, row.date_ms),
                *(row.session_id, row.dedup, row.created_ms, date_words(row.date_ms, row.date_ms)),
                *stored_by,
            ),
        )
        if inserted:
            new.append(row.id)
            ids.append(row.id)
            tokens += row.tokens
            continue
        existing = tx.one(
            "SELECT id FROM memories WHERE vault_id = ? AND dedup = ?", (vault_id, row.dedup)
        )
        assert existing is not None
        ids.append(existing[0])
    stored = len(new)
    reflect.apply_counters(tx, vault_id, counters.after_ingest(stored, tokens))
    reflect.enqueue(tx, model, new)
    return ids, stored, tokens


def writers_of(tx: Tx, vault_id: str, ids: Sequence[str]) -> dict[str, Writer | None]:
    """The writer of each of the vault's memories among ``ids`` (None: not known); a
    memory that is not there (deleted, another vault's) is left out."""
    if not ids:
        return {}
    test, params = tx.among(sorted(set(ids)))
    rows = tx.all(
        f"SELECT id, {WRITER_COLUMNS} FROM memories WHERE {tx.by_key('vault_id')} = ? "
        f"AND id {test}",
        [vault_id, *params],
    )
    return {row[0]: writer_from_row(row[1:]) for row in rows}


# A derived delete that follows evidence: a reflection goes when its evidence includes the
# source, or when it has no evidence recorded (older and imported ones) and its lineage does.
_BY_EVIDENCE = (
    " AND (EXISTS (SELECT 1 FROM evidence e WHERE e.reflection_id = l.parent_id "
    "AND e.memory_id = l.child_id) OR NOT EXISTS (SELECT 1 FROM evidence e "
    "WHERE e.reflection_id = l.parent_id))"
)
# (seq, id, tier, tokens, importance, consolidated) of a row a delete takes
GONE = "SELECT seq, id, tier, tokens, importance, consolidated FROM memories "


@dataclass(frozen=True)
class Deletion:
    """What one delete takes: the rows that go, and the sources (seq, id, tier, tokens,
    importance) that return to the unconsolidated pool."""

    gone: list[Row]
    returned: list[Row]


def plan_delete(
    tx: Tx, vault_id: str, ids: Sequence[str], derived: Derived, lock: bool
) -> Deletion:
    """The vault's rows among ``ids``; with ``derived`` also every reflection, at every tier
    above, built from any of them (``"evidence"``: only those whose own evidence includes
    one, and those with no evidence recorded, which follow their lineage), and the
    surviving sources of the reflections removed that no live reflection still covers. With
    ``lock`` (a delete, not a dry run) each level is locked before the reflections above it
    are read, so a commit racing this delete has either linked its reflection already (and
    it is found) or waits."""
    locked = tx.for_update() if lock else ""
    test, params = tx.among(sorted(set(ids)))
    level = tx.all(
        f"{GONE}WHERE {tx.by_key('vault_id')} = ? AND id {test} ORDER BY id{locked}",
        [vault_id, *params],
    )
    gone = {row[1]: row for row in level}
    while derived and level:
        test, params = tx.among([row[1] for row in level])
        # the rows are this vault's, so are the lineage rows naming them (ids are unique
        # across vaults): looked up by child, never by the vault's whole lineage
        parents = tx.all(
            f"SELECT DISTINCT parent_id FROM lineage l WHERE child_id {test}"
            f"{_BY_EVIDENCE if derived == 'evidence' else ''}",
            params,
        )
        new = sorted({p[0] for p in parents} - gone.keys())
        if not new:
            break
        test, params = tx.among(new)  # this vault's, as the lineage naming them
        level = tx.all(f"{GONE}WHERE id {test} ORDER BY id{locked}", params)
        gone.update((row[1], row) for row in level)
    removed = [row[1] for row in gone.values() if row[2] > 1]
    if not derived or not removed:
        return Deletion(list(gone.values()), [])
    # Each read goes by an index on ids, one table at a time, and ids found through this
    # vault's lineage are not filtered by vault again: a join, or a vault filter beside a long
    # id list, let the planners (PostgreSQL's on stale statistics, SQLite's without any) scan
    # the whole vault instead.
    test, params = tx.among(removed)
    children = tx.all(f"SELECT DISTINCT child_id FROM lineage WHERE parent_id {test}", params)
    candidates = sorted({c[0] for c in children} - gone.keys())
    if not candidates:
        return Deletion(list(gone.values()), [])
    test, params = tx.among(candidates)
    survivors = tx.all(
        "SELECT seq, id, tier, tokens, importance FROM memories "
        f"WHERE id {test} AND consolidated = 1 ORDER BY id",
        params,
    )
    if not survivors:
        return Deletion(list(gone.values()), [])
    test, params = tx.among([row[1] for row in survivors])
    links = tx.all(f"SELECT child_id, parent_id FROM lineage WHERE child_id {test}", params)
    others = sorted({parent for _, parent in links} - gone.keys())
    live: set[str] = set()
    if others:
        test, params = tx.among(others)
        live = {r[0] for r in tx.all(f"SELECT id FROM memories WHERE id {test}", params)}
    covered = {child for child, parent in links if parent in live}
    returned = [row for row in survivors if row[1] not in covered]
    if lock and returned:
        test, params = tx.among([row[1] for row in returned])
        tx.all(f"SELECT id FROM memories WHERE id {test}{locked}", params)
    return Deletion(list(gone.values()), returned)


def delete_ids(tx: Tx, vault_id: str, ids: Sequence[str], derived: Derived = False) -> Deletion:
    """Delete the vault's rows among ``ids`` (and with ``derived`` what was built from them,
    see :func:`plan_delete`) from every layer, in this transaction. A deleted reflection
    takes its lineage with it; a deleted source's lineage stays, for inspect to count. The
    sources returned to the pool are unconsolidated again and rejoin the debt."""
    plan = plan_delete(tx, vault_id, ids, derived, lock=True)
    rows = plan.gone
    if rows:
        _count_lost_support(tx, {r[1] for r in rows})
        seq_test, seqs = tx.among([r[0] for r in rows])
        tx.run(f"DELETE FROM memories WHERE seq {seq_test}", seqs)
        parent_test, parents = tx.among([r[1] for r in rows])
        tx.run(f"DELETE FROM lineage WHERE parent_id {parent_test}", parents)
        tx.run(
            f"DELETE FROM evidence WHERE vault_id = ? AND reflection_id {parent_test}",
            [vault_id, *parents],
        )
    if plan.returned:
        seq_test, seqs = tx.among([r[0] for r in plan.returned])
        tx.run(f"UPDATE memories SET consolidated = 0 WHERE seq {seq_test}", seqs)
    if rows or plan.returned:
        deltas = counters.merged(
            counters.after_delete(r[2:6] for r in rows),
            counters.after_return(r[2:5] for r in plan.returned),
        )
        reflect.apply_counters(tx, vault_id, deltas)
    return plan


def _count_lost_support(tx: Tx, gone: set[str]) -> None:
    """Each reflection built from rows about to go counts them as deleted (one statement;
    a reflection going too is counted and then deleted)."""
    test, params = tx.among(sorted(gone))
    tx.run(
        "UPDATE memories SET sources_deleted = sources_deleted + c.n FROM "
        f"(SELECT parent_id, count(*) AS n FROM lineage WHERE child_id {test} "
        "GROUP BY parent_id) AS c WHERE memories.id = c.parent_id",
        params,
    )


def wipe(tx: Tx, vault_id: str) -> int:
    deleted = tx.run("DELETE FROM memories WHERE vault_id = ?", (vault_id,))
    tx.run("DELETE FROM lineage WHERE vault_id = ?", (vault_id,))
    tx.run(
        "DELETE FROM batch_sources WHERE batch_id IN (SELECT id FROM batches WHERE vault_id = ?)",
        (vault_id,),
    )
    tx.run("DELETE FROM batch_related WHERE vault_id = ?", (vault_id,))
    tx.run("DELETE FROM evidence WHERE vault_id = ?", (vault_id,))
    tx.run("DELETE FROM batches WHERE vault_id = ?", (vault_id,))
    assignments = ", ".join(f"{column} = 0" for column in COUNTERS)
    tx.run(f"UPDATE vaults SET {assignments} WHERE id = ?", (vault_id,))
    return deleted


def replace_model(tx: Tx, old: str, new: str) -> int:
    """Every memory with, or queued for, ``old``'s vectors queued for ``new``; ``old``'s
    vectors and queue rows gone. Idempotent: a second run finds nothing of ``old``."""
    queued = 0
    for source in ("vectors", "embed_queue"):
        queued += tx.run(
            f"INSERT INTO embed_queue (seq, model) SELECT seq, ? FROM {source} "
            "WHERE model = ? ON CONFLICT DO NOTHING",
            (new, old),
        )
    tx.run("DELETE FROM vectors WHERE model = ?", (old,))
    tx.run("DELETE FROM embed_queue WHERE model = ?", (old,))
    return queued


def stats(tx: Tx, vault_id: str) -> Stats:
    v = tx.one(f"SELECT ref, {', '.join(COUNTERS)} FROM vaults WHERE id = ?", (vault_id,))
    assert v is not None
    # Two ordered lookups: min() and max() in one query would scan the vault's index.
    oldest = tx.one(
        "SELECT date_from FROM memories WHERE vault_id = ? ORDER BY date_from LIMIT 1",
        (vault_id,),
    )
    newest = tx.one(
        "SELECT date_from FROM memories WHERE vault_id = ? ORDER BY date_from DESC LIMIT 1",
        (vault_id,),
    )
    n1, tok1, n2, tok2, imp2, n3, tok3, imp3, *debt = map(int, v[1:])
    totals = {
        1: TierTotals(n1, tok1, 0),
        2: TierTotals(n2, tok2, imp2),
        3: TierTotals(n3, tok3, imp3),
    }
    return Stats(
        v[0],
        totals,
        None if oldest is None else oldest[0],
        None if newest is None else newest[0],
        Counters(*debt),
    )


def backlog(tx: Tx, raw_due_tokens: int, tier2_due_importance: int) -> Backlog:
    """Every vault at once, in one statement: one pass over ``vaults`` (its counters are kept
    exact by every write) and a count of the embedding queue. A deleted memory leaves the queue
    with its row (a trigger on SQLite, ``ON DELETE CASCADE`` on PostgreSQL), and a claimed row
    is still pending, so the count is the sum of every vault's ``pending_embeddings``. A vault
    is due when its raw tokens or its tier-2 importance reach the bounds (``rules.debt.due``)."""
    row = tx.one(
        "SELECT count(*), "
        "coalesce(sum(CASE WHEN raw_tokens >= ? OR t2_importance >= ? THEN 1 ELSE 0 END), 0), "
        "coalesce(sum(raw_tokens), 0), coalesce(sum(t2_importance), 0), "
        "(SELECT count(*) FROM embed_queue) "
        "FROM vaults",
        (raw_due_tokens, tier2_due_importance),
    )
    assert row is not None  # an aggregate always answers one row
    return Backlog(*(int(value) for value in row))


def days_by_tier(tx: Tx, vault_id: str) -> list[tuple[int, int, int]]:
    """(UTC day number since 1970-01-01, tier, memories) of the vault, by ``date_from``
    (``rules.timeline``). A deleted memory has no row left to count."""
    rows = tx.all(
        f"SELECT {timeline.DAY_SQL} AS day_number, tier, count(*) FROM memories "
        "WHERE vault_id = ? GROUP BY day_number, tier ORDER BY day_number, tier",
        (vault_id,),
    )
    return [(int(day), int(tier), int(n)) for day, tier, n in rows]


def last_reflection_ms(tx: Tx, vault_id: str) -> int | None:
    """When the vault's newest reflection (tier 2 or 3) was made: its last consolidation."""
    row = tx.one(
        "SELECT max(created_ms) FROM memories WHERE vault_id = ? AND tier > 1", (vault_id,)
    )
    return None if row is None or row[0] is None else int(row[0])
