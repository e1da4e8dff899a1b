"""The scale-out store: PostgreSQL through psycopg 3 and a connection pool.

Any number of stateless server replicas share one database. Every use case is one
transaction; leases, idempotency, the embedding queue and the debt counters all live in
rows, so no replica keeps state another one needs. Statements are never prepared
(``prepare_threshold=None``): a cached generic plan would pin the vector search to one path
whatever the filter (see :mod:`.postgres_vectors`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from mcp_memoryrouter.errors import StoreUnavailable
from mcp_memoryrouter.vault.rules.date_words import date_words
from mcp_memoryrouter.vault.rules.domain import (
    Batch,
    CommitOutcome,
    Counters,
    Created,
    DeleteOutcome,
    EmptyCheckout,
    Entry,
    ExportedMemory,
    KeyRecord,
    Lineage,
    NewRaw,
    ScoredMemory,
    SearchFilter,
    SourceTier,
    Stats,
    Tier,
    TierTotals,
    UsageEvent,
    UsageLine,
)
from mcp_memoryrouter.vault.rules.selection import Selection
from mcp_memoryrouter.vault.rules.window import Order, Page
from mcp_memoryrouter.vault.search.vectors import Pending
from mcp_memoryrouter.vault.store import (
    backup_rows,
    postgres_delete,
    postgres_lexical,
    postgres_reflect,
    postgres_vectors,
    postgres_window,
)
from mcp_memoryrouter.vault.store.postgres_rows import MEMORY_COLUMNS, filter_sql
from mcp_memoryrouter.vault.store.postgres_schema import migrate
from mcp_memoryrouter.vault.store.sqlite_rows import memory_from_row

Conn = psycopg.Connection[tuple[Any, ...]]
T = TypeVar("T")
_RETRIES = 3  # a deadlock or serialization failure is retried: the use case runs again whole
_KEYS = (
    "SELECT k.vault_id, v.ref, k.name, k.read_only, k.created_ms, k.id, k.prefix, "
    "k.last_used_ms FROM keys k JOIN vaults v ON v.id = k.vault_id"
)


def _key(row: tuple[Any, ...]) -> KeyRecord:
    return KeyRecord(row[0], row[1], row[2], bool(row[3]), row[4], row[5], row[6], row[7])


class PostgresStore:
    def __init__(
        self,
        url: str,
        *,
        pool_min: int = 1,
        pool_max: int = 10,
        timeout: float = 30.0,
        exact_max: int = postgres_vectors.EXACT_MAX,
    ) -> None:
        self.url = url
        self._exact_max = exact_max
        try:
            self.schema_version = migrate(url)
            self._pool: ConnectionPool[Conn] = ConnectionPool(
                url,
                min_size=pool_min,
                max_size=max(pool_min, pool_max),
                timeout=timeout,
                kwargs={"prepare_threshold": None},
                # A connection the server dropped (a restart, a failover) is replaced before
                # use instead of failing one request.
                check=ConnectionPool.check_connection,
                name="memoryrouter",
                open=True,
            )
        except psycopg.Error as exc:
            raise StoreUnavailable(f"store unavailable: {type(exc).__name__}") from exc
        self._indexed: set[tuple[str, int]] = set()
        self._index_lock = threading.Lock()
        self._common = postgres_lexical.CommonTerms()

    def warm(self, models: Sequence[tuple[str, int]]) -> None:
        """Nothing to load: PostgreSQL keeps its indexes itself."""

    def close(self) -> None:
        self._pool.close()

    def _run(self, work: Callable[[Conn], T]) -> T:
        """Run ``work`` in one transaction: committed when it returns, rolled back when it
        raises; retried whole after a deadlock or a serialization failure."""
        for attempt in range(_RETRIES):
            try:
                with self._pool.connection() as conn:
                    return work(conn)
            except pg_errors.TransactionRollback as exc:
                if attempt == _RETRIES - 1:
                    raise StoreUnavailable(f"store unavailable: {type(exc).__name__}") from exc
            except (psycopg.Error, PoolTimeout) as exc:
                raise StoreUnavailable(f"store unavailable: {type(exc).__name__}") from exc
        raise AssertionError("unreachable")

    # --- vaults and keys ---------------------------------------------------------------

    def create_vault(self, vault_id: str, ref: str, now_ms: int) -> None:
        self._run(
            lambda c: c.execute(
                "INSERT INTO vaults (id, ref, created_ms) VALUES (%s, %s, %s)",
                (vault_id, ref, now_ms),
            )
        )

    def add_key(self, record: KeyRecord, key_hash: str) -> None:
        self._run(
            lambda c: c.execute(
                "INSERT INTO keys (hash, vault_id, name, read_only, created_ms, id, prefix) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (
                    key_hash,
                    record.vault_id,
                    record.name,
                    int(record.read_only),
                    record.created_ms,
                    record.id,
                    record.prefix,
                ),
            )
        )

    def find_key(self, key_hash: str) -> KeyRecord | None:
        row = self._run(lambda c: c.execute(f"{_KEYS} WHERE k.hash = %s", (key_hash,)).fetchone())
        return None if row is None else _key(row)

    def list_keys(self, vault_id: str) -> list[KeyRecord]:
        rows = self._run(
            lambda c: c.execute(
                f"{_KEYS} WHERE k.vault_id = %s ORDER BY k.created_ms, k.id", (vault_id,)
            ).fetchall()
        )
        return [_key(row) for row in rows]

    def revoke_key(self, vault_id: str, key_id: str) -> bool:
        cursor = self._run(
            lambda c: c.execute(
                "DELETE FROM keys WHERE vault_id = %s AND id = %s", (vault_id, key_id)
            )
        )
        return cursor.rowcount == 1

    def touch_key(self, key_hash: str, now_ms: int, unless_since_ms: int) -> None:
        self._run(
            lambda c: c.execute(
                "UPDATE keys SET last_used_ms = %s WHERE hash = %s "
                "AND (last_used_ms IS NULL OR last_used_ms < %s)",
                (now_ms, key_hash, unless_since_ms),
            )
        )

    def vaults(self) -> list[tuple[str, str]]:
        rows = self._run(
            lambda c: c.execute("SELECT id, ref FROM vaults ORDER BY created_ms, ref").fetchall()
        )
        return [(row[0], row[1]) for row in rows]

    def vault_count(self) -> int:
        row = self._run(lambda c: c.execute("SELECT count(*) FROM vaults").fetchone())
        return int(row[0]) if row else 0

    # --- raw memories ------------------------------------------------------------------

    def ingest(
        self, vault_id: str, rows: Sequence[NewRaw], embed_model: str | None
    ) -> tuple[list[str], int, int]:
        def work(conn: Conn) -> tuple[list[str], int, int]:
            ids: list[str] = []
            new_seqs: list[int] = []
            tokens = 0
            for row in rows:
                inserted = conn.execute(
                    "INSERT INTO memories (id, vault_id, tier, role, content, tokens, date_from, "
                    "date_to, session_id, dedup, created_ms, dated) "
                    "VALUES (%s, %s, 1, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING RETURNING seq",
                    (
                        row.id,
                        vault_id,
                        row.role,
                        row.content,
                        row.tokens,
                        row.date_ms,
                        row.date_ms,
                        row.session_id,
                        row.dedup,
                        row.created_ms,
                        date_words(row.date_ms, row.date_ms),
                    ),
                ).fetchone()
                if inserted is not None:
                    new_seqs.append(inserted[0])
                    ids.append(row.id)
                    tokens += row.tokens
                    continue
                existing = conn.execute(
                    "SELECT id FROM memories WHERE vault_id = %s AND dedup = %s",
                    (vault_id, row.dedup),
                ).fetchone()
                assert existing is not None
                ids.append(existing[0])
            stored = len(new_seqs)
            conn.execute(
                "UPDATE vaults SET raw_units = raw_units + %s, raw_tokens = raw_tokens + %s, "
                "n1 = n1 + %s, tok1 = tok1 + %s WHERE id = %s",
                (stored, tokens, stored, tokens, vault_id),
            )
            postgres_vectors.enqueue(conn, embed_model, new_seqs)
            return ids, stored, tokens

        return self._run(work)

    def counters(self, vault_id: str) -> Counters:
        row = self._run(
            lambda c: c.execute(
                "SELECT raw_units, raw_tokens, t2_count, t2_importance, t2_tokens "
                "FROM vaults WHERE id = %s",
                (vault_id,),
            ).fetchone()
        )
        assert row is not None
        return Counters(*row)

    def search_lexical(
        self, vault_id: str, terms: Sequence[str], limit: int, where: SearchFilter
    ) -> list[ScoredMemory]:
        if not terms:
            return []
        conditions, params = filter_sql(where)
        statement = (
            f"SELECT {MEMORY_COLUMNS}, ts_rank_cd(m.tsv, q) AS rank, m.seq "
            "FROM memories m, websearch_to_tsquery('english', %s) q "
            f"WHERE m.tsv @@ q AND m.vault_id = %s{conditions} "
            "ORDER BY rank DESC, m.seq LIMIT %s"
        )

        def work(conn: Conn) -> list[tuple[Any, ...]]:
            words = self._common.searchable(conn, vault_id, terms)
            if not words:
                return []
            # Any of the words, like the SQLite store's query; websearch_to_tsquery never
            # fails on user text. ts_rank_cd is "higher is better", as the fusion expects.
            return conn.execute(
                statement, [" or ".join(words), vault_id, *params, limit]
            ).fetchall()

        rows = self._run(work)
        return [ScoredMemory(replace(memory_from_row(r), seq=r[11]), float(r[10])) for r in rows]

    def date_page(
        self, vault_id: str, start: int, end: int, order: Order, where: SearchFilter, budget: int
    ) -> Page:
        return self._run(
            lambda c: postgres_window.date_page(c, vault_id, start, end, order, where, budget)
        )

    # --- consolidation -----------------------------------------------------------------

    def checkout(
        self,
        vault_id: str,
        tier: SourceTier,
        rule: Selection,
        batch_id: str,
        now_ms: int,
        lease_until_ms: int,
        session_id: str | None,
    ) -> Batch | EmptyCheckout:
        return self._run(
            lambda c: postgres_reflect.checkout(
                c, vault_id, tier, rule, batch_id, now_ms, lease_until_ms, session_id
            )
        )

    def commit(
        self,
        vault_id: str,
        batch_id: str,
        entries: Sequence[Entry],
        now_ms: int,
        embed_model: str | None,
    ) -> CommitOutcome:
        return self._run(
            lambda c: postgres_reflect.commit(c, vault_id, batch_id, entries, now_ms, embed_model)
        )

    def import_reflections(
        self,
        vault_id: str,
        tier: Tier,
        entries: Sequence[Entry],
        source_ids: Sequence[str],
        covers: tuple[int, int] | None,
        now_ms: int,
        embed_model: str | None,
        sources_deleted: int = 0,
    ) -> list[Created]:
        def work(conn: Conn) -> list[Created]:
            created = postgres_reflect.import_reflections(
                conn, vault_id, tier, entries, source_ids, covers, now_ms, embed_model
            )
            backup_rows.link_deleted_sources(conn, "%s", vault_id, created, sources_deleted)
            return created

        return self._run(work)

    def export_rows(self, vault_id: str, limit: int) -> Iterator[ExportedMemory]:
        # One REPEATABLE READ, READ ONLY transaction on one pooled connection for the whole
        # stream: every page is read in the same snapshot (see backup_rows).
        try:
            with self._pool.connection() as conn:
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield from backup_rows.export_all(conn, "%s", vault_id, limit)
        except (psycopg.Error, PoolTimeout) as exc:
            raise StoreUnavailable(f"store unavailable: {type(exc).__name__}") from exc

    def mark_consolidated(self, vault_id: str, ids: Sequence[str]) -> int:
        return self._run(lambda c: backup_rows.mark_consolidated(c, "%s", vault_id, ids))

    def links(
        self, vault_id: str, parents: Sequence[str], sources: Sequence[str]
    ) -> list[tuple[str, str]]:
        return self._run(lambda c: postgres_reflect.links(c, vault_id, parents, sources))

    def lineage(
        self, vault_id: str, memory_id: str, offset: int, limit: int, similar_in: str | None
    ) -> Lineage:
        return self._run(
            lambda c: postgres_reflect.read_lineage(
                c, vault_id, memory_id, offset, limit, similar_in
            )
        )

    # --- vectors -----------------------------------------------------------------------

    def queued_models(self) -> list[str]:
        return self._run(postgres_vectors.queued_models)

    def take_embed_batch(self, model: str, limit: int) -> list[Pending]:
        return self._run(lambda c: postgres_vectors.take(c, model, limit))

    def take_embed_rows(self, model: str, ids: Sequence[str]) -> list[Pending]:
        return self._run(lambda c: postgres_vectors.take(c, model, len(ids), ids))

    def put_vectors(
        self, model: str, pending: Sequence[Pending], vectors: npt.NDArray[np.float32]
    ) -> None:
        self._run(lambda c: postgres_vectors.put(c, model, pending, vectors))

    def search_vectors(
        self,
        vault_id: str,
        model: str,
        dim: int,
        query: npt.NDArray[np.float32],
        k: int,
        where: SearchFilter,
    ) -> list[ScoredMemory]:
        with self._index_lock:
            if (model, dim) not in self._indexed:
                self._run(lambda c: postgres_vectors.ensure_index(c, model, dim))
                self._indexed.add((model, dim))
        return self._run(
            lambda c: postgres_vectors.search(
                c, vault_id, model, dim, query, k, where, self._exact_max
            )
        )

    def pending_embeddings(self, vault_id: str) -> int:
        return self._run(lambda c: postgres_vectors.pending_count(c, vault_id))

    # --- deletion ----------------------------------------------------------------------

    def delete_ids(self, vault_id: str, ids: Sequence[str]) -> DeleteOutcome:
        rows = self._run(lambda c: postgres_delete.delete_ids(c, vault_id, ids))
        return DeleteOutcome(len(ids), len(rows), len(ids) - len(rows), sum(r[3] for r in rows))

    def wipe(self, vault_id: str) -> int:
        return self._run(lambda c: postgres_delete.wipe(c, vault_id))

    # --- stats and usage ---------------------------------------------------------------

    def stats(self, vault_id: str) -> Stats:
        def work(conn: Conn) -> Stats:
            v = conn.execute(
                "SELECT ref, raw_units, raw_tokens, t2_count, t2_importance, t2_tokens, "
                "n1, tok1, n2, tok2, imp2, n3, tok3, imp3 FROM vaults WHERE id = %s",
                (vault_id,),
            ).fetchone()
            assert v is not None
            oldest = conn.execute(
                "SELECT date_from FROM memories WHERE vault_id = %s ORDER BY date_from LIMIT 1",
                (vault_id,),
            ).fetchone()
            newest = conn.execute(
                "SELECT date_from FROM memories WHERE vault_id = %s "
                "ORDER BY date_from DESC LIMIT 1",
                (vault_id,),
            ).fetchone()
            totals = {
                1: TierTotals(v[6], v[7], 0),
                2: TierTotals(v[8], v[9], v[10]),
                3: TierTotals(v[11], v[12], v[13]),
            }
            return Stats(
                v[0],
                totals,
                oldest[0] if oldest else None,
                newest[0] if newest else None,
                Counters(*v[1:6]),
            )

        return self._run(work)

    def record_usage(self, vault_id: str, events: Sequence[UsageEvent], now_ms: int) -> None:
        if not events:
            return

        def work(conn: Conn) -> None:
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO usage_events (vault_id, at_ms, endpoint, kind, tokens, "
                    "session_id) VALUES (%s, %s, %s, %s, %s, %s)",
                    [
                        (vault_id, now_ms, e.endpoint, e.kind, e.tokens, e.session_id)
                        for e in events
                    ],
                )

        self._run(work)

    def usage(self, vault_id: str, from_ms: int, to_ms: int) -> list[UsageLine]:
        rows = self._run(
            lambda c: c.execute(
                "SELECT endpoint, kind, session_id, count(*), sum(tokens)::bigint "
                "FROM usage_events WHERE vault_id = %s AND at_ms BETWEEN %s AND %s "
                "GROUP BY endpoint, kind, session_id "
                'ORDER BY endpoint COLLATE "C", kind COLLATE "C", '
                'session_id COLLATE "C" NULLS FIRST',
                (vault_id, from_ms, to_ms),
            ).fetchall()
        )
        return [UsageLine(*row) for row in rows]
