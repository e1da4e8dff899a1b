"""SQL pieces shared by the PostgreSQL store modules."""

from __future__ import annotations

from mcp_memoryrouter.vault.rules.domain import SearchFilter

# The same columns, in the same order, as the SQLite store: rows map through one function.
MEMORY_COLUMNS = (
    "m.id, m.tier, m.content, m.tokens, m.date_from, m.date_to, m.role, m.importance, "
    "m.session_id, m.batch_id"
)


def filter_sql(where: SearchFilter) -> tuple[str, list[object]]:
    """``AND ...`` conditions on ``memories m`` for a search filter, and their parameters."""
    sql = ""
    params: list[object] = []
    if where.tiers is not None:
        sql += " AND m.tier = ANY(%s)"
        params.append(list(where.tiers))
    if where.min_importance is not None:
        sql += " AND m.importance >= %s"
        params.append(where.min_importance)
    if where.session_id is not None:
        sql += " AND (m.tier > 1 OR m.session_id = %s)"
        params.append(where.session_id)
    if where.window is not None:
        sql += " AND m.date_from <= %s AND m.date_to >= %s"
        params.extend((where.window[1], where.window[0]))
    return sql, params
