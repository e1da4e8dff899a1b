"""Backups in SQL, once for both stores: an export's pages in storage order, marking
restored memories consolidated, and the lost sources of a restored reflection.

An export reads every page in one snapshot (:func:`export_all`): paging by ``seq`` across
separate transactions would show writes made meanwhile, and on PostgreSQL could skip a
row whose ``seq`` was drawn before a later one but committed after it was paged past.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from mcp_memoryrouter.db import Tx
from mcp_memoryrouter.vault.rules import counters
from mcp_memoryrouter.vault.rules.domain import (
    Created,
    ExportedMemory,
    Superseded,
    new_memory_id,
)
from mcp_memoryrouter.vault.store.reflect import apply_counters
from mcp_memoryrouter.vault.store.sql import (
    MEMORY_COLUMNS,
    WRITER_COLUMNS,
    memory_from_row,
    writer_from_row,
)


def export_page(
    tx: Tx, vault_id: str, after_seq: int, limit: int
) -> tuple[list[ExportedMemory], int]:
    """Up to ``limit`` memories stored after ``after_seq``, in storage order (sources
    before the reflections built on them), and the last seq read (``after_seq`` at the end)."""
    rows = tx.all(
        f"SELECT {MEMORY_COLUMNS}, m.consolidated, m.seq, "
        f"{', '.join('m.' + c for c in WRITER_COLUMNS.split(', '))}, "
        "m.kind, m.superseded_ms, m.superseded_by FROM memories m "
        "WHERE m.vault_id = ? AND m.seq > ? ORDER BY m.seq LIMIT ?",
        (vault_id, after_seq, limit),
    )
    if not rows:
        return [], after_seq
    parents = [r[0] for r in rows if r[1] > 1]
    present: dict[str, list[str]] = {p: [] for p in parents}
    deleted: dict[str, int] = dict.fromkeys(parents, 0)
    if parents:
        test, params = tx.among(parents)
        links = tx.all(
            "SELECT l.parent_id, l.child_id, m.id FROM lineage l "
            "LEFT JOIN memories m ON m.id = l.child_id AND m.vault_id = ? "
            f"WHERE l.parent_id {test} ORDER BY l.parent_id, m.date_from, l.child_id",
            [vault_id, *params],
        )
        for parent, child, found in links:
            if found is None:
                deleted[parent] += 1
            else:
                present[parent].append(child)
    page = [
        ExportedMemory(
            replace(
                memory_from_row(r[:10]),
                stored_by=writer_from_row(r[12:17]),
                kind=r[17],
                superseded=None if r[18] is None else Superseded(int(r[18]), r[19]),
            ),
            bool(r[10]),
            tuple(present.get(r[0], ())),
            deleted.get(r[0], 0),
        )
        for r in rows
    ]
    return page, int(rows[-1][11])


def export_all(tx: Tx, vault_id: str, limit: int) -> Iterator[ExportedMemory]:
    """Every memory of the vault in storage order, read ``limit`` at a time, all in the
    caller's one read transaction (so one snapshot)."""
    after = 0
    while True:
        page, after = export_page(tx, vault_id, after, limit)
        yield from page
        if len(page) < limit:
            return


def mark_consolidated(tx: Tx, vault_id: str, ids: Sequence[str]) -> int:
    """Mark raw memories and tier-2 reflections consolidated (a restore of memories whose
    reflection was deleted), off the debt; rows already consolidated are left. Returns how
    many were marked."""
    test, params = tx.among(ids)
    rows = tx.all(
        "SELECT id, tier, tokens, importance FROM memories "
        f"WHERE vault_id = ? AND consolidated = 0 AND tier < 3 AND id {test}",
        [vault_id, *params],
    )
    for tier in (1, 2):
        chosen = [r for r in rows if r[1] == tier]
        if not chosen:
            continue
        test, params = tx.among([r[0] for r in chosen])
        tx.run(
            "UPDATE memories SET consolidated = 1, lease_batch = NULL, lease_until = NULL "
            f"WHERE id {test}",
            params,
        )
        apply_counters(
            tx, vault_id, counters.after_consolidation(tier, [(r[2], r[3]) for r in chosen], [])
        )
    return len(rows)


def link_deleted_sources(tx: Tx, vault_id: str, created: Sequence[Created], count: int) -> None:
    """Give restored reflections the ``count`` sources they had lost: lineage to ids no
    memory has (fresh UUIDs), which inspect counts in ``sources_deleted`` as before."""
    if not count or not created:
        return
    gone = [new_memory_id() for _ in range(count)]
    tx.many(
        "INSERT INTO lineage (parent_id, child_id, vault_id) VALUES (?, ?, ?)",
        [(reflection.id, child, vault_id) for reflection in created for child in gone],
    )
    test, ids = tx.among([reflection.id for reflection in created])
    tx.run(
        "UPDATE memories SET sources_total = sources_total + ?, "
        f"sources_deleted = sources_deleted + ? WHERE id {test}",
        [count, count, *ids],
    )
