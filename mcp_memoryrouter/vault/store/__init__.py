"""The store protocol: every use case of the vault as one transaction.

Implementations: :mod:`.sqlite` (the embedded default). Rules (selection, leases, debt)
stay pure in ``vault/``; a store only reads and writes rows atomically.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

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
    UsageEvent,
    UsageLine,
)
from mcp_memoryrouter.vault.rules.selection import Selection
from mcp_memoryrouter.vault.rules.window import Order, Page
from mcp_memoryrouter.vault.search.vectors import Pending


class Store(Protocol):
    def close(self) -> None: ...

    def warm(self, models: Sequence[tuple[str, int]]) -> None:
        """Load what searches keep in memory (lexical postings, the vectors of each
        (model, dim)), so the first search after a start does not pay for it."""
        ...

    def create_vault(self, vault_id: str, ref: str, now_ms: int) -> None: ...

    def add_key(self, record: KeyRecord, key_hash: str) -> None: ...

    def find_key(self, key_hash: str) -> KeyRecord | None: ...

    def list_keys(self, vault_id: str) -> list[KeyRecord]:
        """The vault's keys, oldest first."""
        ...

    def revoke_key(self, vault_id: str, key_id: str) -> bool:
        """Delete the key (by its public id) of this vault; False when there is none."""
        ...

    def touch_key(self, key_hash: str, now_ms: int, unless_since_ms: int) -> None:
        """Record a use of the key, unless one at or after ``unless_since_ms`` is recorded."""
        ...

    def vaults(self) -> list[tuple[str, str]]:
        """Every vault as (id, public reference), oldest first."""
        ...

    def vault_count(self) -> int: ...

    def ingest(
        self, vault_id: str, rows: Sequence[NewRaw], embed_model: str | None
    ) -> tuple[list[str], int, int]:
        """Store new rows, skip duplicates, queue new rows for ``embed_model`` in the same
        transaction: (ids in input order, stored, stored tokens)."""
        ...

    def counters(self, vault_id: str) -> Counters: ...

    def search_lexical(
        self, vault_id: str, terms: Sequence[str], limit: int, where: SearchFilter
    ) -> list[ScoredMemory]: ...

    def date_page(
        self, vault_id: str, start: int, end: int, order: Order, where: SearchFilter, budget: int
    ) -> Page:
        """One page of the window [start, end] in ``order`` (see :mod:`vault.window`)."""
        ...

    def checkout(
        self,
        vault_id: str,
        tier: SourceTier,
        rule: Selection,
        batch_id: str,
        now_ms: int,
        lease_until_ms: int,
        session_id: str | None,
    ) -> Batch | EmptyCheckout: ...

    def commit(
        self,
        vault_id: str,
        batch_id: str,
        entries: Sequence[Entry],
        now_ms: int,
        embed_model: str | None,
    ) -> CommitOutcome: ...

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
        """Create reflections at ``tier`` linked to sources one tier below (an import), and
        to ``sources_deleted`` sources that no longer exist."""
        ...

    def export_rows(self, vault_id: str, limit: int) -> Iterator[ExportedMemory]:
        """Every memory of the vault in storage order, read ``limit`` at a time in one read
        snapshot that lasts until the iterator ends or is closed (see :mod:`.backup_rows`)."""
        ...

    def mark_consolidated(self, vault_id: str, ids: Sequence[str]) -> int:
        """Mark these raw memories and tier-2 reflections consolidated (a restore)."""
        ...

    def links(
        self, vault_id: str, parents: Sequence[str], sources: Sequence[str]
    ) -> list[tuple[str, str]]:
        """(reflection, source) lineage pairs with the reflection in ``parents`` and the
        source in ``sources``: how search lifts the rows a relevant reflection was built on."""
        ...

    def lineage(
        self, vault_id: str, memory_id: str, offset: int, limit: int, similar_in: str | None
    ) -> Lineage:
        """Sources by date, or with ``similar_in`` (a vector model) most similar first."""
        ...

    # vectors: a persisted queue per model, and exact search over what was embedded
    def queued_models(self) -> list[str]: ...

    def take_embed_batch(self, model: str, limit: int) -> list[Pending]: ...

    def take_embed_rows(self, model: str, ids: Sequence[str]) -> list[Pending]:
        """The memories among ``ids`` still queued for ``model`` (an ingest embedding its
        own few rows before it answers)."""
        ...

    def put_vectors(
        self, model: str, pending: Sequence[Pending], vectors: npt.NDArray[np.float32]
    ) -> None: ...

    def search_vectors(
        self,
        vault_id: str,
        model: str,
        dim: int,
        query: npt.NDArray[np.float32],
        k: int,
        where: SearchFilter,
    ) -> list[ScoredMemory]: ...

    def pending_embeddings(self, vault_id: str) -> int: ...

    def delete_ids(self, vault_id: str, ids: Sequence[str]) -> DeleteOutcome: ...

    def wipe(self, vault_id: str) -> int: ...

    def stats(self, vault_id: str) -> Stats: ...

    def record_usage(self, vault_id: str, events: Sequence[UsageEvent], now_ms: int) -> None: ...

    def usage(self, vault_id: str, from_ms: int, to_ms: int) -> list[UsageLine]: ...
