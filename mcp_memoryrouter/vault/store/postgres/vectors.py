"""Vectors in PostgreSQL with pgvector: the embedding queue as a table, and search that is
exact where it must be and approximate (HNSW) where it may be.

Vectors of every model share one table with an untyped ``vector`` column, and each model has
a partial HNSW index over ``vec::vector(dim)``, built off the request path by
:func:`build_index` (at start-up, or in the background after a search that wanted it); a
search never builds it, and until it is valid a broad search scores exactly. HNSW answers broad
queries in milliseconds at recall ~1.0 but loses most of its recall under a selective filter
(a date window, one tier, a small vault among many), so a search first counts the rows its
filter leaves, up to ``EXACT_MAX`` (the vault's memories, from its counters, when the vault
is the only filter): below that it scores those rows exactly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from psycopg import errors, sql

from mcp_memoryrouter.db.postgres import Conn
from mcp_memoryrouter.vault.rules.domain import Memory, ScoredMemory, SearchFilter
from mcp_memoryrouter.vault.search.ranking import NEIGHBOUR_GAP_MS
from mcp_memoryrouter.vault.search.rowtable import IndexRow
from mcp_memoryrouter.vault.search.vectors import Pending, VectorQuery, embedding_text
from mcp_memoryrouter.vault.store.postgres.search import filter_sql
from mcp_memoryrouter.vault.store.sql import MEMORY_COLUMNS, memory_from_row

EXACT_MAX = 20_000  # filtered rows scored exactly; beyond this the HNSW index answers
EF_SEARCH = 100  # recall ~1.0 at about 5 ms on 100k x 384-d (pgvector 0.8)
CLAIM = "interval '2 minutes'"  # how long a worker holds queued rows before others retry them


def vector_literal(vector: npt.NDArray[np.float32]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def take(conn: Conn, model: str, limit: int, ids: Sequence[str] = ()) -> list[Pending]:
    """Claim up to ``limit`` queued rows no other worker holds, oldest first; only the
    memories in ``ids`` when given."""
    among = "AND seq IN (SELECT seq FROM memories WHERE id = ANY(%s)) " if ids else ""
    rows = conn.execute(
        f"WITH claimed AS (UPDATE embed_queue SET claimed_until = clock_timestamp() + {CLAIM} "
        "WHERE (model, seq) IN (SELECT model, seq FROM embed_queue WHERE model = %s "
        "AND (claimed_until IS NULL OR claimed_until < clock_timestamp()) "
        f"{among}ORDER BY seq LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING seq) "
        "SELECT m.seq, m.vault_id, m.tier, m.importance, m.date_from, m.date_to, m.session_id, "
        "m.content, p.content FROM claimed q JOIN memories m ON m.seq = q.seq "
        # the turn just before, in the same conversation (see search.ranking.NEIGHBOUR_GAP_MS)
        "LEFT JOIN memories p ON p.seq = m.seq - 1 AND p.vault_id = m.vault_id AND p.tier = 1 "
        "AND m.tier = 1 AND p.session_id IS NOT DISTINCT FROM m.session_id "
        "AND abs(p.date_from - m.date_from) <= %s ORDER BY m.seq",
        (model, *([list(ids)] if ids else []), limit, NEIGHBOUR_GAP_MS),
    ).fetchall()
    return [Pending(IndexRow(*r[:7]), embedding_text(r[7], r[4], r[5], r[8])) for r in rows]


def put(
    conn: Conn, model: str, pending: Sequence[Pending], vectors: npt.NDArray[np.float32]
) -> None:
    """Store vectors of rows that still exist and clear them from the queue."""
    seqs = [item.row.seq for item in pending]
    # Lock the rows first: a delete that already ran leaves nothing to lock, one that comes
    # later waits for this transaction and then cascades to the new vectors.
    found = conn.execute(
        "SELECT seq FROM memories WHERE seq = ANY(%s) ORDER BY seq FOR SHARE", (seqs,)
    ).fetchall()
    alive = {r[0] for r in found}
    rows = [
        (item.row.seq, model, vector_literal(vector))
        for item, vector in zip(pending, vectors, strict=True)
        if item.row.seq in alive
    ]
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO vectors (seq, model, vec) VALUES (%s, %s, %s::vector) "
            "ON CONFLICT (model, seq) DO UPDATE SET vec = excluded.vec",
            rows,
        )
    conn.execute("DELETE FROM embed_queue WHERE model = %s AND seq = ANY(%s)", (model, seqs))


def index_name(model: str, dim: int) -> str:
    return "vectors_hnsw_" + hashlib.sha256(f"{model}\0{dim}".encode()).hexdigest()[:16]


def index_state(conn: Conn, model: str, dim: int) -> bool | None:
    """True when the model's index is valid, False when it exists but is not (a build in
    progress, or one a crash or a cancel left behind), None when there is none."""
    row = conn.execute(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relname = %s AND c.relnamespace = to_regnamespace(current_schema())::oid",
        (index_name(model, dim),),
    ).fetchone()
    return None if row is None else bool(row[0])


def build_index(conn: Conn, model: str, dim: int) -> bool:
    """Build the model's partial HNSW index (m=16, ef_construction=64) unless it is valid;
    False when another builder is at it. ``conn``: an autocommit connection (``CREATE INDEX
    CONCURRENTLY`` runs outside a transaction and takes no lock that stops writes or
    searches). A build under way shows in ``pg_stat_progress_create_index``, which one
    statement reads, so no session lock is held across statements (through a pooler in
    transaction mode such a lock can outlive its session on a server connection). An index
    left invalid by a crashed or cancelled build, with no build under way, is dropped and
    built again; two builders starting at the same moment: one makes it, the other's
    statement fails and it returns False."""
    name = index_name(model, dim)
    if building(conn, name):
        return False
    if index_state(conn, model, dim) is False:
        conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name)))
    try:
        conn.execute(
            sql.SQL(
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS {} ON vectors USING hnsw "
                "((vec::vector({})) vector_cosine_ops) WITH (m = 16, ef_construction = 64) "
                "WHERE model = {}"
            ).format(sql.Identifier(name), sql.Literal(dim), sql.Literal(model))
        )
    except (errors.UniqueViolation, errors.DuplicateTable, errors.DeadlockDetected):
        return False  # another builder took the name first
    return True


def building(conn: Conn, name: str) -> bool:
    """Whether a ``CREATE INDEX CONCURRENTLY`` of index ``name`` is under way."""
    row = conn.execute(
        "SELECT 1 FROM pg_stat_progress_create_index p JOIN pg_class c "
        "ON c.oid = p.index_relid WHERE c.relname = %s",
        (name,),
    ).fetchone()
    return row is not None


def search(
    conn: Conn,
    vault_id: str,
    query: VectorQuery,
    k: int,
    where: SearchFilter,
    exact_max: int = EXACT_MAX,
    indexed: bool = False,
) -> tuple[list[ScoredMemory], str]:
    """The best ``k`` and the path that found them: ``exact``, ``approximate``, or
    ``unindexed`` (broad, but scored exactly: the model's index is not valid yet).
    ``indexed``: the index is known valid, so the catalog need not be asked."""
    model, dim = query.model, query.dim
    conditions, params = filter_sql(where)
    # Literals, not parameters, for the model and the dimension: the planner must see them to
    # match the partial index, and no statement is prepared (prepare_threshold=None), so a
    # generic plan can never freeze one path for every filter.
    model_sql = sql.Literal(model).as_string(conn)
    cast = f"vector({int(dim)})"
    scope = (
        f"FROM vectors v JOIN memories m ON m.seq = v.seq WHERE v.model = {model_sql} "
        f"AND m.vault_id = %s{conditions}"
    )
    if conditions:
        row = conn.execute(
            f"SELECT count(*) FROM (SELECT 1 {scope} LIMIT {int(exact_max)}) s",
            [vault_id, *params],
        ).fetchone()
    else:
        # The vault is the only filter: its memories are counted already (counting its
        # vectors took 13 ms at 100k, more than the approximate search itself).
        row = conn.execute(
            "SELECT least(n1 + n2 + n3, %s) FROM vaults WHERE id = %s", (exact_max, vault_id)
        ).fetchone()
    count = int(row[0]) if row else 0
    if count == 0:
        return [], "exact"
    unindexed = count >= exact_max and not (indexed or index_state(conn, model, dim))
    distance = f"(v.vec::{cast}) <=> %s::{cast}"
    if count < exact_max or unindexed:
        # Exact: score every filtered row, carrying only its seq and id to the sort (the
        # memories' columns are read for the best k alone: 20 -> 13 ms at 10k). OFFSET 0
        # fences the subquery so the ORDER BY can not be served by the approximate index.
        rows = conn.execute(
            f"SELECT {MEMORY_COLUMNS}, d.dist, m.seq FROM (SELECT * FROM (SELECT v.seq, "
            f"m.id, {distance} AS dist {scope} OFFSET 0) s ORDER BY dist, id LIMIT %s) d "
            "JOIN memories m ON m.seq = d.seq AND m.vault_id = %s ORDER BY d.dist, m.id",
            [vector_literal(query.vector), vault_id, *params, k, vault_id],
        ).fetchall()
        hits = [ScoredMemory(memory_from_row(r, r[11]), 1.0 - float(r[10])) for r in rows]
        return hits, "unindexed" if unindexed else "exact"
    # The filter is broad: the approximate index is the path, chosen here rather than
    # left to cost estimates that favour a full scan and sort on smaller tables.
    conn.execute(f"SET LOCAL hnsw.ef_search = {EF_SEARCH}")
    conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
    conn.execute("SET LOCAL enable_seqscan = off")
    conn.execute("SET LOCAL enable_bitmapscan = off")
    conn.execute("SET LOCAL enable_sort = off")
    rows = conn.execute(
        f"SELECT {MEMORY_COLUMNS}, {distance} AS dist, m.seq {scope} ORDER BY dist LIMIT %s",
        [vector_literal(query.vector), vault_id, *params, k],
    ).fetchall()
    hits = [ScoredMemory(memory_from_row(r, r[11]), 1.0 - float(r[10])) for r in rows]
    return sorted(hits, key=lambda h: -(h.score or 0.0)), "approximate"


def similar_sources(
    conn: Conn, vault_id: str, memory: Memory, model: str, offset: int, limit: int
) -> tuple[tuple[Memory, ...], tuple[float | None, ...]]:
    """One page of a reflection's sources, most similar to it in ``model``'s space first
    (cosine; NULL for a source, or a reflection, without a vector of that dimension)."""
    rows = conn.execute(
        f"SELECT {MEMORY_COLUMNS}, CASE WHEN vector_dims(v.vec) = vector_dims(own.vec) "
        "THEN 1 - (v.vec <=> own.vec) END AS score "
        "FROM lineage l JOIN memories m ON m.id = l.child_id "
        "LEFT JOIN vectors v ON v.seq = m.seq AND v.model = %s "
        "LEFT JOIN (SELECT pv.vec FROM vectors pv JOIN memories p ON p.seq = pv.seq "
        "WHERE p.id = %s AND p.vault_id = %s AND pv.model = %s) own ON true "
        "WHERE l.parent_id = %s AND m.vault_id = %s "
        "ORDER BY score DESC NULLS LAST, m.date_from, m.id LIMIT %s OFFSET %s",
        (model, memory.id, vault_id, model, memory.id, vault_id, limit, offset),
    ).fetchall()
    return (
        tuple(memory_from_row(r[:-1]) for r in rows),
        tuple(None if r[-1] is None else float(r[-1]) for r in rows),
    )
