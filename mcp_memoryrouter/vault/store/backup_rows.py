"""The SQL of backups, shared by both stores (only the placeholder differs): the export's
pages in storage order, and marking restored memories consolidated.

Each function runs inside the caller's transaction or read snapshot, on a DB-API style
connection (``sqlite3`` or psycopg) whose ``execute`` takes ``mark`` placeholders. An
export reads every page in one snapshot (:func:`export_all`): paging by ``seq`` across
separate transactions would show writes made meanwhile, and on PostgreSQL could skip a
row whose ``seq`` was drawn before a later one but committed after it was paged past.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from mcp_memoryrouter.vault.rules import counters
from mcp_memoryrouter.vault.rules.domain import Created, ExportedMemory, new_memory_id
from mcp_memoryrouter.vault.store.sqlite_rows import MEMORY_COLUMNS, memory_from_row

MAX_MARK_IDS = 500


class _Rows(Protocol):
    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    def execute(self, sql: Any, params: Any = ..., /) -> Any: ...


def _marks(mark: str, count: int) -> str:
    return ",".join([mark] * count)


def export_page(
    conn: Connection, mark: str, vault_id: str, after_seq: int, limit: int
) -> tuple[list[ExportedMemory], int]:
    """Up to ``limit`` memories stored after ``after_seq``, in storage order (sources
    before the reflections built on them), and the last seq read (``after_seq`` at the end)."""
    rows = conn.execute(
        f"SELECT {MEMORY_COLUMNS}, m.consolidated, m.seq FROM memories m "
        f"WHERE m.vault_id = {mark} AND m.seq > {mark} ORDER BY m.seq LIMIT {mark}",
        (vault_id, after_seq, limit),
    ).fetchall()
    if not rows:
        return [], after_seq
    parents = [r[0] for r in rows if r[1] > 1]
    present: dict[str, list[str]] = {p: [] for p in parents}
    deleted: dict[str, int] = dict.fromkeys(parents, 0)
    if parents:
        links = conn.execute(
            "SELECT l.parent_id, l.child_id, m.id FROM lineage l "
            f"LEFT JOIN memories m ON m.id = l.child_id AND m.vault_id = {mark} "
            f"WHERE l.parent_id IN ({_marks(mark, len(parents))}) "
            "ORDER BY l.parent_id, m.date_from, l.child_id",
            (vault_id, *parents),
        ).fetchall()
        for parent, child, found in links:
            if found is None:
                deleted[parent] += 1
            else:
                present[parent].append(child)
    page = [
        ExportedMemory(
            memory_from_row(r[:10]),
            bool(r[10]),
            tuple(present.get(r[0], ())),
            deleted.get(r[0], 0),
        )
        for r in rows
    ]
    return page, int(rows[-1][11])


def export_all(conn: Connection, mark: str, vault_id: str, limit: int) -> Iterator[ExportedMemory]:
    """Every memory of the vault in storage order, read ``limit`` at a time, all in the
    caller's one read transaction (so one snapshot)."""
    after = 0
    while True:
        page, after = export_page(conn, mark, vault_id, after, limit)
        yield from page
        if len(page) < limit:
            return


def mark_consolidated(conn: Connection, mark: str, vault_id: str, ids: Sequence[str]) -> int:
    """Mark raw memories and tier-2 reflections consolidated (a restore of memories whose
    reflection was deleted), off the debt; rows already consolidated are left. Returns how
    many were marked."""
    rows = conn.execute(
        "SELECT id, tier, tokens, importance FROM memories "
        f"WHERE vault_id = {mark} AND consolidated = 0 AND tier < 3 "
        f"AND id IN ({_marks(mark, len(ids))})",
        (vault_id, *ids),
    ).fetchall()
    for tier in (1, 2):
        chosen = [r for r in rows if r[1] == tier]
        if not chosen:
            continue
        conn.execute(
            "UPDATE memories SET consolidated = 1, lease_batch = NULL, lease_until = NULL "
            f"WHERE id IN ({_marks(mark, len(chosen))})",
            tuple(r[0] for r in chosen),
        )
        deltas = counters.after_consolidation(tier, [(r[2], r[3]) for r in chosen], [])
        sql, params = counters.update_statement(deltas, mark)
        conn.execute(sql, (*params, vault_id))
    return len(rows)


def link_deleted_sources(
    conn: Connection, mark: str, vault_id: str, created: Sequence[Created], count: int
) -> None:
    """Give restored reflections the ``count`` sources they had lost: lineage to ids no
    memory has (fresh UUIDs), which inspect counts in ``sources_deleted`` as before."""
    gone = [new_memory_id() for _ in range(count)]
    for reflection in created:
        for child in gone:
            conn.execute(
                "INSERT INTO lineage (parent_id, child_id, vault_id) "
                f"VALUES ({mark}, {mark}, {mark})",
                (reflection.id, child, vault_id),
            )
