"""Lexical search on PostgreSQL (BM25 over the postings of the ``tsv`` column's lexemes), and
the search filter as SQL, which the vector search shares (its in-memory twin on SQLite is
``search/rowtable.py``; the store tests run both)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from mcp_memoryrouter.db.postgres import Conn
from mcp_memoryrouter.vault.rules.domain import ScoredMemory, SearchFilter
from mcp_memoryrouter.vault.search.lexical import BM25, Bm25
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
    if where.writers is not None:  # rules/writers.py: unknown, or a current key in full
        sql += " AND (m.key_id IS NULL OR (m.key_mode = 'full' AND m.key_id = ANY(%s)))"
        params.append(sorted(where.writers))
    return sql, params


# BM25 over the vault's postings (migration 0005), with the SQLite store's parameters and
# FTS5's expression and order of operations (search/lexical.py). ``w``: each searched lexeme's
# IDF from its exact document frequency in the vault (floored at 1e-6, as FTS5 does), times how
# many query words gave it; ``s``: each memory's score, summed over the postings of those
# lexemes alone, read from the primary key (an index-only scan), never from memories' rows.
_BM25 = """
WITH n AS (
    SELECT greatest(v.n1 + v.n2 + v.n3, 1)::float8 AS total,
           greatest(v.lexemes, 1)::float8 / greatest(v.n1 + v.n2 + v.n3, 1) AS average
    FROM vaults v WHERE v.id = %s
), w AS (
    SELECT q.lexeme, q.times * CASE WHEN n.total - f.df > f.df
        THEN ln((n.total - f.df + 0.5) / (f.df + 0.5)) ELSE 1e-6 END AS idf
    FROM n, unnest(%s::text[], %s::integer[]) AS q (lexeme, times),
    LATERAL (SELECT count(*)::float8 AS df FROM postings c
             WHERE c.vault_id = %s AND c.lexeme = q.lexeme) f
), s AS (
    SELECT p.seq, sum(w.idf * ((p.tf * (%s + 1.0)) / (p.tf + %s * (1 - %s
        + %s * p.dl / n.average)))) AS score
    FROM n, w JOIN postings p ON p.vault_id = %s AND p.lexeme = w.lexeme
    GROUP BY p.seq{early}
)
SELECT {columns}, s.score, m.seq FROM s JOIN memories m ON m.seq = s.seq
WHERE m.vault_id = %s{conditions} ORDER BY s.score DESC, m.seq LIMIT %s
"""
# Without a filter the best ``limit`` are known before a memory is read.
_EARLY = " ORDER BY score DESC, p.seq LIMIT %s"


def search_lexical(
    conn: Conn,
    common: CommonTerms,
    vault_id: str,
    terms: Sequence[str],
    limit: int,
    where: SearchFilter,
    params: Bm25 = BM25,
) -> list[ScoredMemory]:
    lexemes = common.lexemes(conn, vault_id, terms)
    if not lexemes:
        return []
    conditions, values = filter_sql(where)
    times = Counter(lexemes)
    early = [] if conditions else [limit]
    rows = conn.execute(
        _BM25.format(
            early="" if conditions else _EARLY, columns=MEMORY_COLUMNS, conditions=conditions
        ),
        [
            *(vault_id, list(times), list(times.values()), vault_id),
            *(params.k1, params.k1, params.b, params.b, vault_id, *early),
            *(vault_id, *values, limit),
        ],
    ).fetchall()
    return [ScoredMemory(memory_from_row(r, r[11]), float(r[10])) for r in rows]
