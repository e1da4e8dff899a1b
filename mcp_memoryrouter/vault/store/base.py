"""The store: what the service asks of a database, every use case written once in the SQL
of :mod:`.sql`.

:class:`Store` runs each use case as one transaction (or read snapshot) the database gives
it (:meth:`Store._write`, :meth:`Store._read`). A database's store
(:class:`~.sqlite.SQLiteStore`, :class:`~.postgres.PostgresStore`) adds only what is its
own, the abstract methods here: connections and transactions, full-text search, vectors,
the embedding queue's claims, an export's snapshot, and the in-memory indexes a SQLite store
keeps in step after deletes (:meth:`Store._forget`).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter import limits
from mcp_memoryrouter.db import Row, Tx
from mcp_memoryrouter.vault.rules.domain import (
    Backlog,
    Batch,
    Choice,
    CommitOutcome,
    Counters,
    Created,
    DeleteOutcome,
    Derived,
    EmptyCheckout,
    Entry,
    ExportedMemory,
    Follow,
    KeyRecord,
    Lineage,
    Memory,
    NewRaw,
    ReflectorRuns,
    RunEnded,
    ScoredMemory,
    SearchFilter,
    SourceTier,
    Stats,
    Tier,
    UsageEvent,
    UsageLine,
    Writer,
)
from mcp_memoryrouter.vault.rules.evidence import Evidence
from mcp_memoryrouter.vault.rules.selection import Selection
from mcp_memoryrouter.vault.rules.window import Order, Page
from mcp_memoryrouter.vault.search.vectors import Pending, VectorQuery
from mcp_memoryrouter.vault.store import (
    backup,
    current,
    evidence,
    memories,
    reflect,
    reflector,
    window,
)

T = TypeVar("T")
_METERS = threading.Lock()  # makes each store's usage meter once


class _UsageMeter:
    """A store's usage events not written yet (``Store.record_usage``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flushing = threading.Lock()
        self.rows: list[tuple[str, int, str, str, int, str | None]] = []


_KEYS = (
    "SELECT k.vault_id, v.ref, k.name, k.read_only, k.created_ms, k.id, k.prefix, "
    "k.last_used_ms FROM keys k JOIN vaults v ON v.id = k.vault_id"
)


FOLLOW: tuple[Follow, ...] = ("lineage", "evidence")


def _choice(plan: memories.Deletion) -> Choice:
    """What one plan of a derived dry run would take, by tier."""
    by_tier: dict[int, list[str]] = {}
    for row in sorted(plan.gone, key=lambda r: r[1]):
        by_tier.setdefault(int(row[2]), []).append(row[1])
    returned: dict[int, int] = {}
    for row in plan.returned:
        returned[int(row[2])] = returned.get(int(row[2]), 0) + 1
    return Choice(
        {tier: tuple(found) for tier, found in sorted(by_tier.items())},
        dict(sorted(returned.items())),
    )


def _key(row: Row) -> KeyRecord:
    return KeyRecord(row[0], row[1], row[2], bool(row[3]), row[4], row[5], row[6], row[7])


class Store(ABC):
    """The vault's rows over one SQL database; each method is atomic."""

    # Whether rate-limit budgets live in this store, shared by every server over it
    # (``take_token``); otherwise each server keeps them in memory.
    shares_rate_limits = False

    def take_token(self, caller: str, per_minute: int, burst: int) -> float | None:
        """Spend one of ``caller``'s shared rate-limit tokens: None, or the seconds to wait."""
        raise NotImplementedError("this store keeps no rate-limit budgets")

    @abstractmethod
    def _write(self, work: Callable[[Tx], T]) -> T:
        """Run ``work`` in one write transaction: committed when it returns, rolled back
        when it raises (and it may be run again, whole, after a deadlock)."""

    @abstractmethod
    def _read(self, work: Callable[[Tx], T]) -> T:
        """Run ``work`` in one read snapshot."""

    def _forget(self, seqs: Sequence[int]) -> None:  # noqa: B027 (a hook, empty by default)
        """After a delete: drop these rows from whatever the store keeps in memory."""

    def _forget_vault(self, vault_id: str) -> None:  # noqa: B027 (a hook, empty by default)
        """After a wipe: drop the vault from whatever the store keeps in memory."""

    def _forget_model(self, model: str) -> None:  # noqa: B027 (a hook, empty by default)
        """After a model is replaced: drop its vectors from whatever the store keeps in
        memory."""

    @abstractmethod
    def _similar_sources(
        self, model: str, tx: Tx, vault_id: str, memory: Memory, offset: int, limit: int
    ) -> tuple[tuple[Memory, ...], tuple[float | None, ...]]:
        """One page of a reflection's sources most similar to it in ``model``'s space."""

    # --- what each database does its own way -------------------------------------------

    @abstractmethod
    def close(self) -> None:
        """Release the database (a serving SQLite store releases its file)."""

    @abstractmethod
    def warm(self, models: Sequence[tuple[str, int]]) -> None:
        """Load what searches keep in memory (lexical postings, the vectors of each
        (model, dim)), so the first search after a start does not pay for it."""

    @abstractmethod
    def search_lexical(
        self, vault_id: str, terms: Sequence[str], limit: int, where: SearchFilter
    ) -> list[ScoredMemory]:
        """The best ``limit`` memories holding any of the query ``terms``, best first (the
        vault's too common terms left out: ``search.ranking.prune_common``)."""

    @abstractmethod
    def search_vectors(
        self, vault_id: str, query: VectorQuery, k: int, where: SearchFilter
    ) -> list[ScoredMemory]:
        """The ``k`` memories nearest ``query`` (cosine), best first."""

    @abstractmethod
    def _take(self, model: str, limit: int, ids: Sequence[str]) -> list[Pending]:
        """Up to ``limit`` memories queued for ``model`` (only those among ``ids`` when
        given), oldest first, with the text their vectors encode; on PostgreSQL claimed for
        a while, so the workers of several replicas share the queue."""

    @abstractmethod
    def put_vectors(
        self, model: str, pending: Sequence[Pending], found: npt.NDArray[np.float32]
    ) -> None:
        """Store the vectors of rows that still exist, and clear them from the queue."""

    @abstractmethod
    def export_rows(self, vault_id: str, limit: int) -> Iterator[ExportedMemory]:
        """Every memory of the vault in storage order, read ``limit`` at a time in one read
        snapshot that lasts until the iterator ends or is closed (see :mod:`.backup`)."""

    # --- vaults and keys ---------------------------------------------------------------

    def create_vault(self, vault_id: str, ref: str, now_ms: int) -> None:
        self._write(
            lambda tx: tx.run(
                "INSERT INTO vaults (id, ref, created_ms) VALUES (?, ?, ?)",
                (vault_id, ref, now_ms),
            )
        )

    def add_key(self, record: KeyRecord, key_hash: str) -> None:
        self._write(
            lambda tx: tx.run(
                "INSERT INTO keys (hash, vault_id, name, read_only, created_ms, id, prefix) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    *(key_hash, record.vault_id, record.name, int(record.read_only)),
                    *(record.created_ms, record.id, record.prefix),
                ),
            )
        )

    def find_key(self, key_hash: str) -> KeyRecord | None:
        row = self._read(lambda tx: tx.one(f"{_KEYS} WHERE k.hash = ?", (key_hash,)))
        return None if row is None else _key(row)

    def list_keys(self, vault_id: str) -> list[KeyRecord]:
        """The vault's keys, oldest first."""
        rows = self._read(
            lambda tx: tx.all(
                f"{_KEYS} WHERE k.vault_id = ? ORDER BY k.created_ms, k.id", (vault_id,)
            )
        )
        return [_key(row) for row in rows]

    def revoke_key(self, vault_id: str, key_id: str) -> bool:
        """Delete the key (by its public id) of this vault; False when there is none."""
        revoked = self._write(
            lambda tx: tx.run("DELETE FROM keys WHERE vault_id = ? AND id = ?", (vault_id, key_id))
        )
        return revoked == 1

    def touch_key(self, vault_id: str, key_hash: str, now_ms: int, unless_since_ms: int) -> None:
        """Record a use of the vault's key, unless one at or after ``unless_since_ms`` is
        recorded."""
        self._write(
            lambda tx: tx.run(
                "UPDATE keys SET last_used_ms = ? WHERE hash = ? AND vault_id = ? "
                "AND (last_used_ms IS NULL OR last_used_ms < ?)",
                (now_ms, key_hash, vault_id, unless_since_ms),
            )
        )

    def vaults(self) -> list[tuple[str, str]]:
        """Every vault as (id, public reference), oldest first."""
        rows = self._read(lambda tx: tx.all("SELECT id, ref FROM vaults ORDER BY created_ms, ref"))
        return [(row[0], row[1]) for row in rows]

    def vault_count(self) -> int:
        row = self._read(lambda tx: tx.one("SELECT count(*) FROM vaults"))
        return int(row[0]) if row else 0

    # --- raw memories ------------------------------------------------------------------

    def ingest(
        self,
        vault_id: str,
        rows: Sequence[NewRaw],
        embed_model: str | None,
        writer: Writer | None = None,
    ) -> tuple[list[str], int, int]:
        """Store new rows as ``writer``'s (None: unknown), skip duplicates, queue new rows
        for ``embed_model`` in the same transaction: (ids in input order, stored, stored
        tokens)."""
        return self._write(
            partial(memories.ingest, vault_id=vault_id, rows=rows, model=embed_model, writer=writer)
        )

    def writers_of(self, vault_id: str, ids: Sequence[str]) -> dict[str, Writer | None]:
        """Which key stored each of the vault's memories among ``ids`` (None: not known)."""
        return self._read(partial(memories.writers_of, vault_id=vault_id, ids=ids))

    def counters(self, vault_id: str) -> Counters:
        row = self._read(
            lambda tx: tx.one(
                "SELECT raw_units, raw_tokens, t2_count, t2_importance, t2_tokens "
                "FROM vaults WHERE id = ?",
                (vault_id,),
            )
        )
        return Counters() if row is None else Counters(*map(int, row))

    def date_page(
        self, vault_id: str, start: int, end: int, order: Order, where: SearchFilter, budget: int
    ) -> Page:
        """One page of the window [start, end] in ``order`` (see :mod:`...rules.window`)."""
        return self._read(
            lambda tx: window.date_page(tx, vault_id, start, end, order, where, budget)
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
        return self._write(
            lambda tx: reflect.checkout(
                tx, vault_id, tier, rule, batch_id, now_ms, lease_until_ms, session_id
            )
        )

    def commit(
        self,
        vault_id: str,
        batch_id: str,
        entries: Sequence[Entry],
        now_ms: int,
        embed_model: str | None,
        writer: Writer | None = None,
    ) -> CommitOutcome:
        return self._write(
            lambda tx: reflect.commit(tx, vault_id, batch_id, entries, now_ms, embed_model, writer)
        )

    def relate(self, vault_id: str, batch_id: str, shown: Sequence[tuple[str, str]]) -> None:
        """Record a version-2 checkout and the (label, reflection id) pairs it showed."""
        self._write(lambda tx: current.relate(tx, vault_id, batch_id, shown))

    def described(self, vault_id: str, ids: Sequence[str]) -> dict[str, current.Described]:
        """What stored each of ``ids``, whether it was replaced, and its kind (one read)."""
        return self._read(lambda tx: current.described(tx, vault_id, ids)) if ids else {}

    def replaced_count(self, vault_id: str) -> int:
        """How many of the vault's memories a later reflection replaced."""
        return self._read(lambda tx: current.replaced_count(tx, vault_id))

    def outdated(self, vault_id: str, ids: Sequence[str]) -> dict[str, str]:
        """The moments among ``ids`` a replaced reflection stood on, each to that reflection."""
        return self._read(lambda tx: current.outdated(tx, vault_id, ids)) if ids else {}

    def superseded_ids(self, vault_id: str) -> frozenset[str]:
        return self._read(lambda tx: current.superseded_ids(tx, vault_id))

    def successors(self, vault_id: str, ids: Sequence[str]) -> dict[str, Memory]:
        """The current reflection each replaced one among ``ids`` leads to."""
        return self._read(lambda tx: current.successors(tx, vault_id, ids)) if ids else {}

    def replaced(self, vault_id: str, memory_id: str) -> list[Memory]:
        """The reflections ``memory_id`` replaced, newest first."""
        return self._read(lambda tx: current.replaced(tx, vault_id, memory_id))

    def preferences(self, vault_id: str, kinds: Sequence[str]) -> list[Memory]:
        """The vault's current memories of these kinds, most important and newest first."""
        return self._read(lambda tx: current.preferences(tx, vault_id, kinds))

    def batch_lines(self, vault_id: str, batch_id: str) -> int | None:
        """How many lines the batch's checkout text held (None: no such batch)."""
        return self._read(lambda tx: evidence.batch_lines(tx, vault_id, batch_id))

    def unrecorded_evidence(
        self, vault_id: str, batch_id: str, model: str | None
    ) -> evidence.Unrecorded | None:
        """A committed batch whose evidence is still to be recorded, its sources with their
        vectors in ``model`` (see :mod:`.evidence`)."""
        return self._read(lambda tx: evidence.unrecorded(tx, vault_id, batch_id, model))

    def record_evidence(
        self,
        vault_id: str,
        batch_id: str,
        found: Mapping[str, Sequence[Evidence]],
        weak: Mapping[str, bool],
    ) -> dict[str, bool]:
        """Record each reflection's evidence and weak flag once: the flags as recorded."""
        return self._write(lambda tx: evidence.record(tx, vault_id, batch_id, found, weak))

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
        writer: Writer | None = None,
        replaced: Sequence[tuple[str, int, int]] = (),
    ) -> list[Created]:
        """Create reflections at ``tier`` linked to sources one tier below (an import), and
        to ``sources_deleted`` sources that no longer exist; mark ``replaced`` (id, when,
        entry index) superseded by the entries that replaced them."""

        def work(tx: Tx) -> list[Created]:
            created = reflect.import_reflections(
                tx, vault_id, tier, entries, source_ids, covers, now_ms, embed_model, writer
            )
            backup.link_deleted_sources(tx, vault_id, created, sources_deleted)
            current.restore(tx, vault_id, tier, created, replaced)
            return created

        return self._write(work)

    def mark_consolidated(self, vault_id: str, ids: Sequence[str]) -> int:
        """Mark these raw memories and tier-2 reflections consolidated (a restore)."""
        return self._write(lambda tx: backup.mark_consolidated(tx, vault_id, ids))

    def links(
        self, vault_id: str, parents: Sequence[str], sources: Sequence[str]
    ) -> list[tuple[str, str]]:
        """(reflection, source) lineage pairs with the reflection in ``parents`` and the
        source in ``sources``: how search lifts the rows a relevant reflection was built on."""
        return self._read(lambda tx: reflect.links(tx, vault_id, parents, sources))

    def with_support(self, vault_id: str, rows: Sequence[Memory]) -> tuple[Memory, ...]:
        """``rows`` with each reflection's support (sources linked, and deleted since)."""
        if all(m.tier == 1 for m in rows):
            return tuple(rows)
        return self._read(lambda tx: reflect.with_support(tx, rows))

    def lineage(
        self, vault_id: str, memory_id: str, offset: int, limit: int, similar_in: str | None
    ) -> Lineage:
        """Sources by date, or with ``similar_in`` (a vector model) most similar first."""
        similar = None if similar_in is None else partial(self._similar_sources, similar_in)
        return self._read(
            lambda tx: reflect.read_lineage(tx, vault_id, memory_id, offset, limit, similar)
        )

    # --- the embedding queue -----------------------------------------------------------

    def take_embed_batch(self, model: str, limit: int) -> list[Pending]:
        """The next ``limit`` memories queued for ``model``, oldest first."""
        return self._take(model, limit, ())

    def take_embed_rows(self, model: str, ids: Sequence[str]) -> list[Pending]:
        """The memories among ``ids`` still queued for ``model`` (a search embedding its
        vault's latest small writes first: ``EmbeddingWorker.catch_up``)."""
        return self._take(model, len(ids), ids)

    def replace_model(self, old: str, new: str) -> int:
        """Queue for ``new`` every memory that had, or awaited, ``old``'s vectors, and drop
        ``old``'s: a replaced model's vectors are never searched beside its successor's (the
        memories are found lexically until re-embedded). The number newly queued."""
        queued = self._write(partial(memories.replace_model, old=old, new=new))
        self._forget_model(old)
        return queued

    def queued_models(self) -> list[str]:
        rows = self._read(lambda tx: tx.all("SELECT DISTINCT model FROM embed_queue"))
        return [row[0] for row in rows]

    def pending_embeddings(self, vault_id: str) -> int:
        row = self._read(
            lambda tx: tx.one(
                f"SELECT count(*) FROM embed_queue q {tx.join_in_order} memories m "
                "ON m.seq = q.seq WHERE m.vault_id = ?",
                (vault_id,),
            )
        )
        return int(row[0]) if row else 0

    # --- deletion ----------------------------------------------------------------------

    def delete_ids(
        self, vault_id: str, ids: Sequence[str], derived: Derived = False, dry_run: bool = False
    ) -> DeleteOutcome:
        """Delete ``ids`` (with ``derived``, and the reflections built from them); a dry run
        reads what would go in one snapshot and changes nothing, and when derived, shows
        what following lineage and following evidence would each take."""
        choices: dict[Follow, Choice] = {}
        if dry_run:

            def plans(tx: Tx) -> list[memories.Deletion]:
                ways: list[Derived] = [derived, True, "evidence"] if derived else [derived]
                return [memories.plan_delete(tx, vault_id, ids, way, lock=False) for way in ways]

            plan, *others = self._read(plans)
            choices = {way: _choice(other) for way, other in zip(FOLLOW, others, strict=False)}
        else:
            plan = self._write(
                partial(memories.delete_ids, vault_id=vault_id, ids=ids, derived=derived)
            )
            self._forget([row[0] for row in plan.gone])
        asked = set(ids)
        taken = _choice(plan)
        found = sum(1 for row in plan.gone if row[1] in asked)
        return DeleteOutcome(
            requested=len(ids),
            deleted=0 if dry_run else len(plan.gone),
            not_found=len(ids) - found,
            tokens=0 if dry_run else sum(r[3] for r in plan.gone),
            by_tier=taken.by_tier,
            returned=taken.returned,
            dry_run=dry_run,
            choices=choices,
        )

    def wipe(self, vault_id: str) -> int:
        deleted = self._write(partial(memories.wipe, vault_id=vault_id))
        self._forget_vault(vault_id)
        return deleted

    # --- stats and usage ---------------------------------------------------------------

    def stats(self, vault_id: str) -> Stats:
        return self._read(partial(memories.stats, vault_id=vault_id))

    def backlog(self, raw_due_tokens: int, tier2_due_importance: int) -> Backlog:
        """Every vault at once (``memories.backlog``): one read, one statement."""
        return self._read(
            partial(
                memories.backlog,
                raw_due_tokens=raw_due_tokens,
                tier2_due_importance=tier2_due_importance,
            )
        )

    def days_by_tier(self, vault_id: str) -> tuple[list[tuple[int, int, int]], int | None]:
        """The vault's memories counted per UTC day and tier (see ``memories.days_by_tier``),
        and when its newest reflection was made, from one read."""

        def read(tx: Tx) -> tuple[list[tuple[int, int, int]], int | None]:
            return memories.days_by_tier(tx, vault_id), memories.last_reflection_ms(tx, vault_id)

        return self._read(read)

    def record_usage(self, vault_id: str, events: Sequence[UsageEvent], now_ms: int) -> None:
        """Meter ``events``: kept in memory, written by :meth:`flush_usage` (the background
        worker's, at least every ``limits.USAGE_FLUSH_SECONDS``), so a search is no write
        transaction; the call that finds ``limits.USAGE_WAITING_MAX`` events waiting writes
        them itself."""
        if not events:
            return
        meter = self._usage_meter()
        rows = [(vault_id, now_ms, e.endpoint, e.kind, e.tokens, e.session_id) for e in events]
        with meter.lock:
            meter.rows.extend(rows)
            full = len(meter.rows) >= limits.USAGE_WAITING_MAX
        if full:
            self.flush_usage()

    def usage_waiting(self) -> int:
        """How many usage events wait in memory to be written."""
        return len(self._usage_meter().rows)

    def flush_usage(self) -> int:
        """Write the usage events waiting in memory, in one transaction: how many. When the
        write fails they wait for the next flush (in their order) and the error is raised."""
        meter = self._usage_meter()
        with meter.flushing:  # one flush at a time: events are written in their order
            with meter.lock:
                rows, meter.rows = meter.rows, []
            if not rows:
                return 0
            try:
                self._write(
                    lambda tx: tx.many(
                        "INSERT INTO usage_events (vault_id, at_ms, endpoint, kind, tokens, "
                        "session_id) VALUES (?, ?, ?, ?, ?, ?)",
                        rows,
                    )
                )
            except BaseException:
                with meter.lock:
                    meter.rows[:0] = rows
                raise
            return len(rows)

    def _usage_meter(self) -> _UsageMeter:
        meter: _UsageMeter | None = self.__dict__.get("_usage")
        if meter is None:
            with _METERS:
                meter = self.__dict__.setdefault("_usage", _UsageMeter())
        assert meter is not None
        return meter

    # --- the server's reflector (store/reflector.py) -------------------------------------

    def reflector_runs(self, vault_id: str) -> ReflectorRuns:
        return self._read(partial(reflector.state, vault_id=vault_id))

    def claim_reflector(
        self, vault_id: str, holder: str, now_ms: int, until_ms: int, *, triggered: bool
    ) -> ReflectorRuns | None:
        return self._write(
            lambda tx: reflector.claim(tx, vault_id, holder, now_ms, until_ms, triggered=triggered)
        )

    def finish_reflector(self, vault_id: str, holder: str, ended: RunEnded) -> None:
        self._write(lambda tx: reflector.finish(tx, vault_id, holder, ended))

    def enable_reflector(self, vault_id: str, enabled: bool) -> ReflectorRuns:
        return self._write(lambda tx: reflector.enable(tx, vault_id, enabled))

    def usage(self, vault_id: str, from_ms: int, to_ms: int) -> list[UsageLine]:
        """The vault's metered tokens in the period: what waits in memory is written first,
        so a read counts every event this server metered."""
        self.flush_usage()

        def work(tx: Tx) -> list[Row]:
            text = tx.bytewise
            return tx.all(
                "SELECT endpoint, kind, session_id, count(*), CAST(sum(tokens) AS BIGINT) "
                "FROM usage_events WHERE vault_id = ? AND at_ms BETWEEN ? AND ? "
                "GROUP BY endpoint, kind, session_id "
                f"ORDER BY endpoint{text}, kind{text}, session_id{text} NULLS FIRST",
                (vault_id, from_ms, to_ms),
            )

        return [UsageLine(*row) for row in self._read(work)]
