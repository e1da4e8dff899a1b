"""Deletion in PostgreSQL: rows leave every layer in the caller's transaction. The tsvector
is a column of the row, and the foreign-key cascades take its vectors and queue entries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from mcp_memoryrouter.vault.rules import counters

Conn = psycopg.Connection[tuple[Any, ...]]


def delete_ids(conn: Conn, vault_id: str, ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """Delete the vault's rows among ``ids``: (seq, id, tier, tokens, importance,
    consolidated) of each row deleted."""
    rows = conn.execute(
        "DELETE FROM memories WHERE vault_id = %s AND id = ANY(%s) "
        "RETURNING seq, id, tier, tokens, importance, consolidated",
        (vault_id, sorted(set(ids))),
    ).fetchall()
    if rows:
        conn.execute("DELETE FROM lineage WHERE parent_id = ANY(%s)", ([r[1] for r in rows],))
        sql, params = counters.update_statement(counters.after_delete(r[2:6] for r in rows), "%s")
        conn.execute(sql, [*params, vault_id])
    return rows


def wipe(conn: Conn, vault_id: str) -> int:
    count = conn.execute("DELETE FROM memories WHERE vault_id = %s", (vault_id,)).rowcount
    conn.execute("DELETE FROM lineage WHERE vault_id = %s", (vault_id,))
    conn.execute(
        "DELETE FROM batch_sources WHERE batch_id IN (SELECT id FROM batches WHERE vault_id = %s)",
        (vault_id,),
    )
    conn.execute("DELETE FROM batches WHERE vault_id = %s", (vault_id,))
    conn.execute(
        "UPDATE vaults SET raw_units = 0, raw_tokens = 0, t2_count = 0, t2_importance = 0, "
        "t2_tokens = 0, n1 = 0, tok1 = 0, n2 = 0, tok2 = 0, imp2 = 0, n3 = 0, tok3 = 0, "
        "imp3 = 0 WHERE id = %s",
        (vault_id,),
    )
    return count
