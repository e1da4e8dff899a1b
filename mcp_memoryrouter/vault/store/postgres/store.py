"""The scale-out store: PostgreSQL through psycopg 3 and a connection pool.

Any number of stateless server replicas share one database. Every use case is one
transaction; leases, idempotency, the embedding queue and the debt counters all live in
rows, so no replica keeps state another one needs. Statements are never prepared
(``prepare_threshold=None``): a cached generic plan would pin the vector search to one path
whatever the filter (see :mod:`.vectors`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from mcp_memoryrouter.db import Tx
from mcp_memoryrouter.db.postgres import Conn, PgTx, Pool, direct, pool, unavailable
from mcp_memoryrouter.vault.rules import counters
from mcp_memoryrouter.vault.rules.date_words import date_words
from mcp_memoryrouter.vault.rules.domain import (
    ExportedMemory,
    Memory,
    NewRaw,
    ScoredMemory,
    SearchFilter,
    Writer,
)
from mcp_memoryrouter.vault.search.vectors import Pending, VectorQuery
from mcp_memoryrouter.vault.store import backup, memories
from mcp_memoryrouter.vault.store.base import Store
from mcp_memoryrouter.vault.store.postgres import lexical, search, vectors
from mcp_memoryrouter.vault.store.postgres.schema import migrate
from mcp_memoryrouter.vault.store.sql import WRITER_COLUMNS, writer_columns

T = TypeVar("T")
_RETRIES = 3  # a deadlock or serialization failure is retried: the use case runs again whole
# One take in this many also forgets buckets full again (a full bucket and none are the same)
_SWEEP_EVERY = 1000
_CLOSE_WAIT_SECONDS = 5.0  # a background index build left unfinished is rebuilt later
# between two attempts of one process to build a model's index (another replica may be at
# it for an hour at a million vectors: not a connection per broad search meanwhile)
_BUILD_RETRY_SECONDS = 60.0

log = logging.getLogger(__name__)

# Refill, then spend a token if there is one, in one statement by the database's clock: the
# same answer whichever replica asks. Parameters: caller, burst, per_ms (4 uses), burst (3).
_TAKE = """
INSERT INTO rate_buckets AS b (caller, tokens, at_ms, last_ok)
VALUES (%s, %s - 1, (extract(epoch FROM clock_timestamp()) * 1000)::bigint, true)
ON CONFLICT (caller) DO UPDATE SET
    tokens = CASE
        WHEN least(%s, b.tokens + greatest(0, EXCLUDED.at_ms - b.at_ms) * %s) >= 1
        THEN least(%s, b.tokens + greatest(0, EXCLUDED.at_ms - b.at_ms) * %s) - 1
        ELSE least(%s, b.tokens + greatest(0, EXCLUDED.at_ms - b.at_ms) * %s)
    END,
    last_ok = least(%s, b.tokens + greatest(0, EXCLUDED.at_ms - b.at_ms) * %s) >= 1,
    at_ms = greatest(b.at_ms, EXCLUDED.at_ms)
RETURNING last_ok, tokens
"""  # a deadlock or serialization failure is retried: the use case runs again whole


def _ingest_sql() -> str:
    """Insert the rows (a duplicate skipped), add what was stored to the vault's counters by
    ``counters.after_ingest`` (its columns and their sizes, read from the rule), queue the
    stored rows for the model, and answer, per input row in order, whether it was stored
    and the id of the row it duplicates: all in one statement."""
    per_unit, per_token = counters.after_ingest(1, 0), counters.after_ingest(0, 1)
    sets = ", ".join(
        f"{c} = {c} + {per_unit.get(c, 0)} * s.n + {per_token.get(c, 0)} * s.tok"
        for c in sorted({*per_unit, *per_token})
    )
    return f"""
WITH input AS (
    SELECT * FROM unnest(
        %s::text[], %s::text[], %s::text[], %s::integer[], %s::bigint[], %s::text[],
        %s::text[], %s::bigint[], %s::text[]
    ) WITH ORDINALITY AS t(id, role, content, tokens, date_ms, session_id, dedup, created_ms,
                           dated, ord)
),
ins AS (
    INSERT INTO memories (id, vault_id, tier, role, content, tokens, date_from, date_to,
                          session_id, dedup, created_ms, dated, {WRITER_COLUMNS})
    SELECT id, %s, 1, role, content, tokens, date_ms, date_ms, session_id, dedup, created_ms,
           dated, %s, %s, %s, %s, %s
    FROM input ORDER BY ord
    ON CONFLICT DO NOTHING
    RETURNING seq, id, tokens
),
counted AS (
    UPDATE vaults SET {sets}
    FROM (SELECT count(*) AS n, coalesce(sum(tokens), 0) AS tok FROM ins) s
    WHERE vaults.id = %s
    RETURNING 1
),
queued AS (
    INSERT INTO embed_queue (seq, model)
    SELECT seq, %s FROM ins WHERE %s::text IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT ins.id IS NOT NULL, m.id
FROM input
LEFT JOIN ins ON ins.id = input.id
LEFT JOIN memories m ON m.vault_id = %s AND m.dedup = input.dedup
ORDER BY input.ord
"""


_INGEST = _ingest_sql()


def _ingested(row: NewRaw) -> tuple[object, ...]:
    return (
        *(row.id, row.role, row.content, row.tokens, row.date_ms, row.session_id, row.dedup),
        *(row.created_ms, date_words(row.date_ms, row.date_ms)),
    )


def _ingest_outcome(
    rows: Sequence[NewRaw], found: Sequence[tuple[object, ...]]
) -> tuple[list[str], int, int]:
    """(ids in input order, stored, stored tokens) from the statement's rows: a row stored,
    or the id of the row it duplicates, found before (``m.id``; the statement's snapshot
    predates its own inserts) or stored earlier in the same request."""
    ids: list[str] = []
    first: dict[str, str] = {}
    stored = tokens = 0
    for row, (inserted, existing) in zip(rows, found, strict=True):
        if inserted:
            ids.append(row.id)
            first.setdefault(row.dedup, row.id)
            stored += 1
            tokens += row.tokens
        else:
            ids.append(str(existing) if existing is not None else first[row.dedup])
    return ids, stored, tokens


def _conn(tx: Tx) -> Conn:
    assert isinstance(tx, PgTx)
    return tx.conn


class PostgresStore(Store):
    def __init__(
        self,
        url: str,
        *,
        pool_min: int = 1,
        pool_max: int = 10,
        timeout: float = 30.0,
        exact_max: int = vectors.EXACT_MAX,
    ) -> None:
        self.url = url
        self._exact_max = exact_max
        try:
            self.schema_version = migrate(url)
            self._pool: Pool = pool(
                url, name="memoryrouter", min_size=pool_min, max_size=pool_max, timeout=timeout
            )
        except psycopg.Error as exc:
            raise unavailable(exc) from exc
        self._takes = 0
        self._indexed: set[tuple[str, int]] = set()  # spaces whose index is known valid
        self._builds: dict[tuple[str, int], threading.Thread] = {}
        self._build_tried: dict[tuple[str, int], float] = {}  # monotonic seconds
        self._index_lock = threading.Lock()
        self._common = lexical.CommonTerms()

    def warm(self, models: Sequence[tuple[str, int]]) -> None:
        """Nothing to load, but each model's HNSW index to build when it is missing or
        invalid (run by the embedding worker at start-up, off the request path)."""
        for model, dim in models:
            self.build_vector_index(model, dim)

    def build_vector_index(self, model: str, dim: int) -> bool:
        """Build ``model``'s HNSW index unless it is valid; False when another replica is
        building it. Minutes at 100k vectors: never on a request's path."""
        try:
            with direct(self.url) as conn:
                built = vectors.build_index(conn, model, dim)
                valid = vectors.index_state(conn, model, dim)
        except (psycopg.Error, PoolTimeout) as exc:
            raise unavailable(exc) from exc
        if valid:
            self._indexed.add((model, dim))
        return built

    def _build_later(self, space: tuple[str, int]) -> None:
        """Build ``space``'s index in the background, once at a time in this process and at
        most once a ``_BUILD_RETRY_SECONDS``."""
        with self._index_lock:
            running = self._builds.get(space)
            if running is not None and running.is_alive():
                return
            now = time.monotonic()
            if now - self._build_tried.get(space, -_BUILD_RETRY_SECONDS) < _BUILD_RETRY_SECONDS:
                return
            self._build_tried[space] = now
            thread = threading.Thread(
                target=self._build_quietly, args=space, name="hnsw-build", daemon=True
            )
            self._builds[space] = thread
            thread.start()

    def _build_quietly(self, model: str, dim: int) -> None:
        try:
            self.build_vector_index(model, dim)
        except Exception as exc:  # a search retries it; searches score exactly meanwhile
            log.error("building the vector index of %s failed: %s", model, type(exc).__name__)

    def close(self) -> None:
        for thread in list(self._builds.values()):
            thread.join(_CLOSE_WAIT_SECONDS)  # one still running ends with the process
        self._pool.close()

    shares_rate_limits = True

    def ingest(
        self,
        vault_id: str,
        rows: Sequence[NewRaw],
        embed_model: str | None,
        writer: Writer | None = None,
    ) -> tuple[list[str], int, int]:
        """The shared ingest (``memories.ingest``) as one statement whatever the number of
        rows: one round trip to the database per request instead of one per row."""
        if not rows:
            return self._write(
                partial(memories.ingest, vault_id=vault_id, rows=rows, model=None, writer=writer)
            )
        columns = [list(c) for c in zip(*(_ingested(row) for row in rows), strict=True)]
        params = (*columns, vault_id, *writer_columns(writer), vault_id)
        found = self._run(
            lambda conn: conn.execute(
                _INGEST, (*params, embed_model, embed_model, vault_id)
            ).fetchall()
        )
        return _ingest_outcome(rows, found)

    def take_token(self, caller: str, per_minute: int, burst: int) -> float | None:
        """Spend one of ``caller``'s tokens in the bucket every replica shares: None, or the
        seconds until a token is back (``burst`` tokens, ``per_minute`` a minute)."""
        per_ms = per_minute / 60_000
        self._takes += 1
        sweep = self._takes % _SWEEP_EVERY == 0

        def work(conn: Conn) -> tuple[bool, float]:
            if sweep:
                full_ms = int(burst / per_ms) + 1
                conn.execute(
                    "DELETE FROM rate_buckets WHERE at_ms < "
                    "(extract(epoch FROM clock_timestamp()) * 1000)::bigint - %s",
                    (full_ms,),
                )
            row = conn.execute(_TAKE, (caller, burst, *(burst, per_ms) * 4)).fetchone()
            assert row is not None
            return bool(row[0]), float(row[1])

        ok, tokens = self._run(work)
        return None if ok else (1 - tokens) / per_ms / 1000

    def _run(self, work: Callable[[Conn], T]) -> T:
        """Run ``work`` in one transaction: committed when it returns, rolled back when it
        raises; retried whole after a deadlock or a serialization failure."""
        for attempt in range(_RETRIES):
            try:
                with self._pool.checkout() as conn:
                    return work(conn)
            except pg_errors.TransactionRollback as exc:
                if attempt == _RETRIES - 1:
                    raise unavailable(exc) from exc
            except (psycopg.Error, PoolTimeout) as exc:
                raise unavailable(exc) from exc
        raise AssertionError("unreachable")

    def _write(self, work: Callable[[Tx], T]) -> T:
        return self._run(lambda conn: work(PgTx(conn)))

    _read = _write  # a transaction is a snapshot here too

    def export_rows(self, vault_id: str, limit: int) -> Iterator[ExportedMemory]:
        # One REPEATABLE READ, READ ONLY transaction on one pooled connection for the whole
        # stream: every page is read in the same snapshot (see backup.py).
        try:
            with self._pool.checkout() as conn:
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield from backup.export_all(PgTx(conn), vault_id, limit)
        except (psycopg.Error, PoolTimeout) as exc:
            raise unavailable(exc) from exc

    # --- search ------------------------------------------------------------------------

    def search_lexical(
        self, vault_id: str, terms: Sequence[str], limit: int, where: SearchFilter
    ) -> list[ScoredMemory]:
        if not terms:
            return []
        return self._run(
            lambda c: search.search_lexical(c, self._common, vault_id, terms, limit, where)
        )

    def search_vectors(
        self, vault_id: str, query: VectorQuery, k: int, where: SearchFilter
    ) -> list[ScoredMemory]:
        space = (query.model, query.dim)
        indexed = space in self._indexed
        hits, path = self._run(
            lambda c: vectors.search(c, vault_id, query, k, where, self._exact_max, indexed)
        )
        if path == "approximate":
            self._indexed.add(space)
        elif path == "unindexed":
            self._build_later(space)
        return hits

    def _similar_sources(
        self, model: str, tx: Tx, vault_id: str, memory: Memory, offset: int, limit: int
    ) -> tuple[tuple[Memory, ...], tuple[float | None, ...]]:
        return vectors.similar_sources(_conn(tx), vault_id, memory, model, offset, limit)

    # --- the embedding queue -----------------------------------------------------------

    def _take(self, model: str, limit: int, ids: Sequence[str]) -> list[Pending]:
        return self._run(lambda c: vectors.take(c, model, limit, ids))

    def put_vectors(
        self, model: str, pending: Sequence[Pending], found: npt.NDArray[np.float32]
    ) -> None:
        self._run(lambda c: vectors.put(c, model, pending, found))
