"""Deletion in PostgreSQL: rows leave every layer in the caller's transaction. The tsvector
is a column of the row, and the foreign-key cascades take its vectors and queue entries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

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
        _subtract_counters(conn, vault_id, rows)
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


def _subtract_counters(conn: Conn, vault_id: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Take deleted rows (seq, id, tier, tokens, importance, consolidated) off the counters."""
    count = {1: 0, 2: 0, 3: 0}
    tokens = {1: 0, 2: 0, 3: 0}
    importance = {1: 0, 2: 0, 3: 0}
    open_count = {1: 0, 2: 0}
    open_tokens = {1: 0, 2: 0}
    open_importance = {1: 0, 2: 0}
    for _, _, tier, row_tokens, row_importance, consolidated in rows:
        count[tier] += 1
        tokens[tier] += row_tokens
        importance[tier] += row_importance or 0
        if tier < 3 and not consolidated:
            open_count[tier] += 1
            open_tokens[tier] += row_tokens
            open_importance[tier] += row_importance or 0
    conn.execute(
        "UPDATE vaults SET raw_units = raw_units - %s, raw_tokens = raw_tokens - %s, "
        "t2_count = t2_count - %s, t2_importance = t2_importance - %s, "
        "t2_tokens = t2_tokens - %s, n1 = n1 - %s, tok1 = tok1 - %s, n2 = n2 - %s, "
        "tok2 = tok2 - %s, imp2 = imp2 - %s, n3 = n3 - %s, tok3 = tok3 - %s, imp3 = imp3 - %s "
        "WHERE id = %s",
        (
            open_count[1],
            open_tokens[1],
            open_count[2],
            open_importance[2],
            open_tokens[2],
            count[1],
            tokens[1],
            count[2],
            tokens[2],
            importance[2],
            count[3],
            tokens[3],
            importance[3],
            vault_id,
        ),
    )
