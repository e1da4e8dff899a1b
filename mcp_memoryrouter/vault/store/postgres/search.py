"""Lexical search on PostgreSQL (the generated ``tsv`` column, ranked by ``ts_rank_cd``), and
the search filter as SQL, which the vector search shares (its in-memory twin on SQLite is
``search/rowtable.py``; the store tests run both)."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memoryrouter.vault.rules.domain import ScoredMemory, SearchFilter
from mcp_memoryrouter.vault.store.postgres.connection import Conn
from mcp_memoryrouter.vault.store.postgres.lexical import CommonTerms
from mcp_memoryrouter.vault.store.sql import MEMORY_COLUMNS, memory_from_row


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


def search_lexical(
    conn: Conn,
    common: CommonTerms,
    vault_id: str,
    terms: Sequence[str],
    limit: int,
    where: SearchFilter,
) -> list[ScoredMemory]:
    words = common.searchable(conn, vault_id, terms)
    if not words:
        return []
    conditions, params = filter_sql(where)
    # Any of the words, like the SQLite store's query; websearch_to_tsquery never fails on
    # user text. ts_rank_cd is "higher is better", as the fusion expects.
    rows = conn.execute(
        f"SELECT {MEMORY_COLUMNS}, ts_rank_cd(m.tsv, q) AS rank, m.seq "
        "FROM memories m, websearch_to_tsquery('english', %s) q "
        f"WHERE m.tsv @@ q AND m.vault_id = %s{conditions} "
        "ORDER BY rank DESC, m.seq LIMIT %s",
        [" or ".join(words), vault_id, *params, limit],
    ).fetchall()
    return [ScoredMemory(memory_from_row(r, r[11]), float(r[10])) for r in rows]
