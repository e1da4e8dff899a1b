"""The vault's use cases. Each method checks what the key may do, applies the pure rules,
runs one store transaction and meters usage as the billing table says."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace

from mcp_memoryrouter import limits
from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.tokens import est_tokens
from mcp_memoryrouter.vault import evidence
from mcp_memoryrouter.vault.duplicates import Found, near_duplicates
from mcp_memoryrouter.vault.hybrid import HybridSearch
from mcp_memoryrouter.vault.indexer import EmbeddingWorker
from mcp_memoryrouter.vault.memory_keys import MemoryKeys
from mcp_memoryrouter.vault.rules import (
    chunking,
    contract,
    current,
    debt,
    leases,
    near,
    selection,
    when,
    window,
    writers,
)
from mcp_memoryrouter.vault.rules.access import Access
from mcp_memoryrouter.vault.rules.domain import (
    REFLECTOR_ENDPOINT,
    Backlog,
    Batch,
    CommitOutcome,
    Counters,
    Created,
    DeleteOutcome,
    Derived,
    EmptyCheckout,
    Entry,
    ExportedMemory,
    KeyRecord,
    Lineage,
    Memory,
    NewRaw,
    ReflectorRuns,
    Related,
    Role,
    RunEnded,
    RunOutcome,
    ScoredMemory,
    SearchFilter,
    SourceTier,
    Stats,
    Tier,
    UsageEvent,
    UsageLine,
    new_batch_id,
    new_memory_id,
    reflection_tier,
)
from mcp_memoryrouter.vault.rules.prepare import ContextSize, build_context, standing
from mcp_memoryrouter.vault.rules.timeline import BucketSize, Timeline, fold
from mcp_memoryrouter.vault.rules.window import Order
from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.search.vectors import VectorQuery
from mcp_memoryrouter.vault.store import Store

Clock = Callable[[], int]
EXPORT_PAGE = 500  # memories per store read while an export streams
DATE_QUERY_CANDIDATES = 250


@dataclass(frozen=True)
class IncomingMessage:
    role: Role
    content: str
    date_ms: int | None
    session_id: str | None = None  # beats the request's session


@dataclass(frozen=True)
class IngestOutcome:
    ids: list[str]
    stored: int
    duplicates: int
    counters: Counters
    # near-duplicates: (id, score) of memories already in the vault the stored texts nearly
    # repeat (None: none found, so the answer keeps the product document's shape); with
    # dedupe "near", (message index, id, score) of each unit not stored
    similar: list[tuple[str, float]] | None = None
    skipped: list[tuple[int, str, float]] | None = None


def _dedup_key(role: str, session_id: str | None, date_ms: int, index: int, text: str) -> str:
    """Same content, date, role and session (and unit position) is the same memory."""
    material = "\x1f".join((role, session_id or "", str(date_ms), str(index), text))
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:32]


def _stored_by_session(rows: Sequence[NewRaw], ids: Sequence[str]) -> list[UsageEvent]:
    """Ingest's storage usage, one event per session (in the order they came): the tokens
    of the rows stored, each a row whose own new id came back (a duplicate answers the id
    it already had)."""
    tokens: dict[str | None, int] = {}
    for row, memory_id in zip(rows, ids, strict=True):
        if memory_id == row.id:
            tokens[row.session_id] = tokens.get(row.session_id, 0) + row.tokens
    return [UsageEvent("ingest", "storage", n, session) for session, n in tokens.items()]


class VaultService:
    def __init__(
        self,
        store: Store,
        *,
        clock: Clock,
        lease_seconds: int,
        embedders: Embedders | None = None,
        worker: EmbeddingWorker | None = None,
        learned_ranker: bool = True,
    ) -> None:
        """``worker`` embeds what is written (woken on every write); ``learned_ranker``:
        search re-ranks with the package's learned ranker when it ships one."""
        self._store = store
        self._clock = clock
        self._lease_seconds = lease_seconds
        self._embedders = embedders or Embedders({}, "none")
        self.worker = worker
        self._hybrid = HybridSearch(store, self._embedders, "shipped" if learned_ranker else None)
        self.keys = MemoryKeys(store, clock)
        # Vaults seen to hold memories prepare leaves out by default: their prepares search
        # among the injectable alone from the start (see _injectable).
        self._mixed: set[str] = set()

    @property
    def embedders(self) -> Embedders:
        """The embedding models requests may name (``Embedders.names``)."""
        return self._embedders

    def close(self) -> None:
        """Stop the embedding worker, write the usage metered since its last flush and close
        the store (a SQLite store releases its file)."""
        if self.worker is not None:
            self.worker.stop()
        self._hybrid.close()
        try:
            self._store.flush_usage()
        finally:
            self._store.close()

    def _wake(self) -> None:
        if self.worker is not None:
            self.worker.wake()

    # --- keys ----------------------------------------------------------------------

    def authenticate(self, presented: str | None) -> Access:
        return self.keys.authenticate(presented)

    def create_vault(self, *, name: str = "default", read_only: bool = False) -> tuple[str, str]:
        """Create a vault and its first key: (key, vault reference). The key is shown once."""
        return self.keys.create_vault(name=name, read_only=read_only)

    def mint_key(self, access: Access, name: str | None, read_only: bool) -> tuple[str, KeyRecord]:
        return self.keys.mint(access, name, read_only)

    # --- raw memories ----------------------------------------------------------------

    def ingest(
        self,
        access: Access,
        messages: Sequence[IncomingMessage],
        session_id: str | None,
        embeddings: str | None = None,
        dedupe: near.Dedupe = "exact",
    ) -> IngestOutcome:
        """Answered before anything is embedded: the next search of the vault embeds what a
        small write queued (``EmbeddingWorker.catch_up``). ``dedupe``: "near" compares each
        unit with the memories already in the vault, lists those it nearly repeats and
        leaves out a unit that repeats one (``rules.near``); the default compares nothing."""
        access.require_write()
        model = self._model_id(embeddings)
        now = self._clock()
        rows: list[NewRaw] = []
        sent: list[int] = []  # each row's message
        for index, message in enumerate(messages):
            content = message.content.strip()
            if not content:
                field = f"messages[{index}].content"
                raise InvalidRequest("message content must not be blank", {"field": field})
            date_ms = now if message.date_ms is None else message.date_ms
            session = message.session_id or session_id
            for part, unit in enumerate(chunking.split_message(content)):
                dedup = _dedup_key(message.role, session, date_ms, part, unit)
                rows.append(
                    NewRaw(
                        new_memory_id(),
                        message.role,
                        unit,
                        est_tokens(unit),
                        date_ms,
                        session,
                        dedup,
                        now,
                    )
                )
                sent.append(index)
        found = self._near(access.vault_id, rows, embeddings) if dedupe == "near" else []
        skipped: dict[int, Found] = {}
        for i, hits in enumerate(found):
            repeated = [f for f in hits if near.repeats(rows[i].content, f.content, f.score)]
            if repeated:
                skipped[i] = repeated[0]
        kept = [row for i, row in enumerate(rows) if i not in skipped]
        new_ids, stored, _ = self._store.ingest(access.vault_id, kept, model, access.writer)
        if stored:
            self._store.record_usage(access.vault_id, _stored_by_session(kept, new_ids), now)
            if model is not None and self.worker is not None:
                new = [i for row, i in zip(kept, new_ids, strict=True) if i == row.id]
                self.worker.written(access.vault_id, model, new)  # the next search embeds it
            self._wake()
        answered = iter(new_ids)
        ids = [skipped[i].id if i in skipped else next(answered) for i in range(len(rows))]
        similar: dict[str, float] = {}
        for i, hits in enumerate(found):
            for f in hits:
                if i not in skipped and f.score > similar.get(f.id, -1.0):
                    similar[f.id] = f.score
        return IngestOutcome(
            ids,
            stored,
            len(rows) - stored,
            self._store.counters(access.vault_id),
            sorted(similar.items(), key=lambda s: (-s[1], s[0])) or None,
            [(sent[i], f.id, f.score) for i, f in sorted(skipped.items())]
            if dedupe == "near"
            else None,
        )

    def _near(
        self, vault_id: str, rows: Sequence[NewRaw], embeddings: str | None
    ) -> list[list[Found]]:
        """Each row's near-duplicates in the vault, in the model the write embeds with (the
        vault's latest writes embedded first, so they are compared too)."""
        embedder = self._embedders.get(self._embedders.resolve(embeddings))
        if embedder is not None and self.worker is not None:
            self.worker.catch_up(vault_id)
        texts = [(row.content, row.date_ms) for row in rows]
        return near_duplicates(self._store, vault_id, texts, embedder)

    def _search(
        self,
        vault_id: str,
        query: str,
        limit: int,
        where: SearchFilter,
        embeddings: str | None,
        named: when.Window | None = None,
        *,
        meaning: str | None = None,
    ) -> list[ScoredMemory]:
        """The hybrid search, once the vault's latest small writes are embedded (read your
        writes by meaning: ``EmbeddingWorker.catch_up``)."""
        if self.worker is not None:
            self.worker.catch_up(vault_id)
        return self._hybrid(vault_id, query, limit, where, embeddings, named, meaning=meaning)

    def search(
        self,
        access: Access,
        query: str,
        limit: int,
        where: SearchFilter,
        embeddings: str | None = None,
        as_of: int | None = None,
        current_only: bool = False,
        kinds: Sequence[str] | None = None,
    ) -> tuple[list[ScoredMemory], Counters]:
        """``as_of``: when the question is asked (default now), for the time it names.
        The current fact first (``rules.current``); ``current_only`` leaves replaced
        reflections out; ``kinds`` searches among the memories of those kinds alone."""
        access.require_read()
        named = self._named_time(query, as_of)
        vault = access.vault_id
        if kinds:
            hits = self._of_kinds(access, query, limit, where, embeddings, named, kinds)
        else:
            wider = limit + self._replaced_count(vault) if current_only else limit
            found = self._search(vault, query, wider, where, embeddings, named)
            hits = self._current(vault, found, current_only)[:limit]
        tokens = sum(h.memory.tokens for h in hits)
        if tokens:
            self._meter(access, UsageEvent("search", "retrieval", tokens, where.session_id))
        return hits, self._store.counters(access.vault_id)

    def _of_kinds(
        self,
        access: Access,
        query: str,
        limit: int,
        where: SearchFilter,
        embeddings: str | None,
        named: when.Window | None,
        kinds: Sequence[str],
    ) -> list[ScoredMemory]:
        """The vault's current memories of ``kinds`` (a few hundred at most): those the
        search finds first, as it ranks them, then the rest, most important first."""
        vault = access.vault_id
        rows = self._store.preferences(vault, kinds)
        wanted = {m.id for m in rows}
        found = self._search(vault, query, limits.SEARCH_LIMIT_MAX, where, embeddings, named)
        ranked = [h for h in found if h.memory.id in wanted]
        ranked_ids = {h.memory.id for h in ranked}
        ranked += [ScoredMemory(m, None) for m in rows if m.id not in ranked_ids]
        return self._supported(vault, ranked[:limit])

    def _replaced_count(self, vault_id: str) -> int:
        """How many more rows a search that leaves replaced reflections out reads."""
        return min(self._store.replaced_count(vault_id), limits.SEARCH_LIMIT_MAX)

    def _current(
        self, vault_id: str, found: Sequence[ScoredMemory], current_only: bool
    ) -> list[ScoredMemory]:
        """``found`` described (``_supported``), each replaced reflection after the current
        one it leads to (``rules.current``)."""
        hits = self._supported(vault_id, found)
        replaced = [h.memory.id for h in hits if h.memory.superseded is not None]
        stood_on = self._store.outdated(vault_id, [h.memory.id for h in hits if h.memory.tier == 1])
        leads = self._store.successors(vault_id, [*replaced, *stood_on.values()])
        leads.update((moment, leads[r]) for moment, r in stood_on.items() if r in leads)
        if leads:
            shown = self._supported(vault_id, [ScoredMemory(m, None) for m in leads.values()])
            by_id = {h.memory.id: h.memory for h in shown}
            leads = {old: by_id[new.id] for old, new in leads.items()}
        return current.current_first(hits, leads, current_only=current_only)

    def _named_time(self, query: str, as_of: int | None) -> when.Window | None:
        """The window ``query`` names, counted from ``as_of`` (default now)."""
        return when.window_in(query, self._clock() if as_of is None else as_of)

    def prepare(
        self,
        access: Access,
        query: str,
        budget: ContextSize,
        where: SearchFilter,
        embeddings: str | None = None,
        as_of: int | None = None,
        meaning: str | None = None,
        stored_by: writers.Writers = "trusted",
        current_only: bool = True,
    ) -> tuple[tuple[str, int, int], Counters]:
        """A context block for the next model call: (context, memories found, est. tokens).
        ``meaning`` is what the vector side embeds when it is not the whole ``query``;
        ``stored_by`` whose memories it may hold (``rules.writers``). The vault's current
        preferences come first, within a small budget; replaced reflections are left out
        unless ``current_only`` is False."""
        access.require_read()
        named = self._named_time(query, as_of)
        vault = access.vault_id
        wider = budget.items + self._replaced_count(vault) if current_only else budget.items

        def find(among: SearchFilter) -> list[ScoredMemory]:
            hits = self._search(vault, query, wider, among, embeddings, named, meaning=meaning)
            return self._current(vault, hits, current_only)[: budget.items]

        hits: list[ScoredMemory] = []
        if query:
            hits = (
                find(where)
                if stored_by == "any"
                else self._injectable(access.vault_id, where, find)
            )
        built = build_context(hits, budget, self._standing(vault, budget, stored_by))
        if built[2]:
            self._meter(access, UsageEvent("prepare", "retrieval", built[2], where.session_id))
        return built, self._store.counters(access.vault_id)

    def _standing(
        self, vault_id: str, budget: ContextSize, stored_by: writers.Writers
    ) -> list[Memory]:
        """The current preferences prepare puts first, within their budget (only what a
        current key stored, unless ``stored_by`` is "any")."""
        found = self._store.preferences(vault_id, limits.KINDS)
        if found and stored_by != "any":
            keys = frozenset(k.id for k in self._store.list_keys(vault_id))
            stored = self._store.writers_of(vault_id, [m.id for m in found])
            found = [m for m in found if writers.injectable(stored.get(m.id), keys)]
        tokens = current.preference_budget(budget.tokens, limits.PREFERENCES_TOKENS)
        return standing(found, tokens)

    def _injectable(
        self, vault: str, where: SearchFilter, find: Callable[[SearchFilter], list[ScoredMemory]]
    ) -> list[ScoredMemory]:
        """What ``find`` answers among the memories prepare injects by default. A filter
        costs PostgreSQL its shortest paths, and most vaults hold nothing to leave out: so
        the search runs unfiltered, its hits are checked, and only when one is left out does
        it run again among the injectable alone (as every later prepare of that vault does)."""
        current = frozenset(k.id for k in self._store.list_keys(vault))
        among = replace(where, writers=current)
        if vault in self._mixed:
            return find(among)
        hits = find(where)
        stored = self._store.writers_of(vault, [h.memory.id for h in hits])
        if all(
            h.memory.id in stored and writers.injectable(stored[h.memory.id], current) for h in hits
        ):
            return hits
        self._mixed.add(vault)
        return find(among)

    def date_search(
        self,
        access: Access,
        start: int,
        end: int,
        query: str | None,
        where: SearchFilter,
        max_tokens: float | None,
        order: Order,
        embeddings: str | None = None,
        current_only: bool = False,
    ) -> tuple[DatePage, Counters]:
        """A window's rows by date, or with ``query`` by relevance, the current fact first
        within the window; ``current_only`` leaves replaced reflections out."""
        access.require_read()
        budget = limits.DATE_PAGE_TOKENS if max_tokens is None else _budget(max_tokens)
        if start > end:
            # a window that closes before it opens holds nothing: JSON Schema cannot compare
            # two fields, so /openapi.json allows it and the answer is an empty page
            return DatePage((), start, end, False), self._store.counters(access.vault_id)
        where = replace(where, window=(start, end))
        if query is not None and query.strip():
            found = self._search(access.vault_id, query, DATE_QUERY_CANDIDATES, where, embeddings)
            hits = [
                h
                for h in self._current(access.vault_id, found, current_only)
                if h.memory.date_from <= end and h.memory.date_to >= start
            ]
            taken: list[ScoredMemory] = []
            tokens = 0
            for hit in hits:
                if taken and tokens + hit.memory.tokens > budget:
                    break
                taken.append(hit)
                tokens += hit.memory.tokens
            truncated = len(taken) < len(hits)
            page = DatePage(tuple(taken), start, end, truncated)
        else:
            dated = self._store.date_page(access.vault_id, start, end, order, where, budget)
            bounds = _returned(dated, start, end, order)
            rows = self._supported(access.vault_id, [ScoredMemory(m, None) for m in dated.rows])
            if current_only:
                rows = [h for h in rows if h.memory.superseded is None]
            page = DatePage(tuple(rows), *bounds, dated.boundary is not None)
        tokens = sum(h.memory.tokens for h in page.rows)
        if tokens:
            self._meter(access, UsageEvent("date-search", "retrieval", tokens, where.session_id))
        return page, self._store.counters(access.vault_id)

    # --- consolidation ---------------------------------------------------------------

    def checkout(
        self,
        access: Access,
        tier: SourceTier,
        max_tokens: float | None,
        session_id: str | None,
        contract_version: int = 1,
    ) -> Batch | EmptyCheckout:
        """Lease a batch. Version 2 of the contract also shows the reflections the vault
        already holds that relate to the batch, by label (``_related``)."""
        access.require_full()
        cap = None if max_tokens is None else _budget(max_tokens)
        now = self._clock()
        result = self._store.checkout(
            access.vault_id,
            tier,
            selection.selection_for(tier, cap),
            new_batch_id(),
            now,
            leases.lease_until(now, self._lease_seconds),
            session_id,
        )
        if isinstance(result, Batch):
            if contract_version == 2:
                result = self._related(access.vault_id, result)
            self._meter(access, UsageEvent("checkout", "retrieval", result.est_tokens, session_id))
        return result

    def _related(self, vault_id: str, batch: Batch) -> Batch:
        """The batch with the current reflections of the tier it makes that relate to it,
        each recorded under the label the contract shows: those most like any one of its lines
        by meaning in the default model (one fact among small talk still finds the reflection
        it changes), or without vectors found by words over runs of its texts
        (``rules.current``)."""
        replaced = self._store.superseded_ids(vault_id)
        where = SearchFilter(tiers=(reflection_tier(batch.tier),))
        wider = limits.RELATED_MAX + min(len(replaced), limits.SEARCH_LIMIT_MAX)
        texts = [c.content for c in batch.sources]
        embedder = self._embedders.get(self._embedders.resolve(None))
        if embedder is not None:
            lines = current.spread_lines(texts, limits.RELATED_LINES)
            deep = 3 * wider  # each line's hits, for the median it stands out from
            per_line = [
                self._store.search_vectors(
                    vault_id, VectorQuery(embedder.model_id, embedder.dim, vector), deep, where
                )
                for vector in embedder.embed(lines)
            ]
            floor = embedder.relevance_floor
            rows = current.strongest(per_line, replaced, floor, limits.RELATED_MAX)
        else:
            queries = current.related_queries(
                texts, limits.RELATED_QUERIES, limits.RELATED_QUERY_CHARS
            )
            found = [
                [h.memory for h in self._search(vault_id, q, wider, where, None)] for q in queries
            ]
            rows = current.merged(
                [[m for m in f if m.id not in replaced] for f in found], limits.RELATED_MAX
            )
        shown = [
            Related(label, m.date_from, m.date_to, current.gist(m.content, limits.RELATED_CHARS))
            for label, m in zip(contract.labels(len(rows)), rows, strict=True)
        ]
        self._store.relate(
            vault_id, batch.batch_id, [(r.label, m.id) for r, m in zip(shown, rows, strict=True)]
        )
        return replace(batch, contract=2, related=tuple(shown))

    def commit(
        self,
        access: Access,
        batch_id: str,
        entries: Sequence[Entry],
        session_id: str | None,
        embeddings: str | None = None,
    ) -> tuple[CommitOutcome, Counters]:
        access.require_full()
        checked = contract.check_entries(entries)
        evidence.check_cites(self._store, access.vault_id, batch_id, checked)
        outcome = self._store.commit(
            access.vault_id,
            batch_id,
            checked,
            self._clock(),
            self._model_id(embeddings),
            access.writer,
        )
        default = self._embedders.get(self._embedders.resolve(None))
        outcome = evidence.record(self._store, default, access.vault_id, outcome, checked)
        if not outcome.already_committed:
            tokens = sum(est_tokens(e.text) for e in checked)
            self._meter(access, UsageEvent("commit", "storage", tokens, session_id))
            self._wake()
        return outcome, self._store.counters(access.vault_id)

    def import_reflections(
        self,
        access: Access,
        tier: Tier,
        entries: Sequence[Entry],
        source_ids: Sequence[str],
        covers: tuple[int, int] | None,
        sources_deleted: int = 0,
        replaced: Sequence[tuple[str, int, int]] = (),
    ) -> tuple[list[Created], Counters]:
        """Recreate exported reflections with their lineage (see ``mcp-memoryrouter import``),
        and mark superseded the reflections imported before that they replaced (``replaced``:
        id, when, entry index)."""
        access.require_full()
        checked = contract.check_entries(entries)
        created = self._store.import_reflections(
            access.vault_id,
            tier,
            checked,
            list(dict.fromkeys(source_ids)),
            covers,
            self._clock(),
            self._model_id(None),
            sources_deleted,
            access.writer,
            replaced,
        )
        self._wake()
        tokens = sum(est_tokens(e.text) for e in checked)
        self._meter(access, UsageEvent("import-reflections", "storage", tokens))
        return created, self._store.counters(access.vault_id)

    def mark_consolidated(self, access: Access, ids: Sequence[str]) -> tuple[int, Counters]:
        """Restore the consolidated flag of memories whose reflection is gone (an import)."""
        access.require_full()
        unique = list(dict.fromkeys(ids))
        marked = self._store.mark_consolidated(access.vault_id, unique)
        return marked, self._store.counters(access.vault_id)

    def export(self, access: Access) -> Generator[ExportedMemory]:
        """Every memory of the vault in storage order, read page by page (never the whole
        vault in memory at once), all in one snapshot: the vault as it was when the first
        page was read, whatever is written while the export streams."""
        access.require_read()
        yield from self._store.export_rows(access.vault_id, EXPORT_PAGE)

    # --- lineage, deletion, stats ------------------------------------------------------

    def inspect(
        self,
        access: Access,
        memory_id: str,
        offset: int,
        session_id: str | None,
        order: str = "date",
    ) -> Lineage:
        """A memory's sources (by date, or most similar first in the default vector space)
        and the reflections built from it."""
        access.require_read()
        similar_in = self._model_id(None) if order == "similarity" else None
        found = self._store.lineage(
            access.vault_id, memory_id, offset, limits.INSPECT_PAGE, similar_in
        )
        shown = self._stored_by(
            access.vault_id, [found.memory, *found.sources, *found.consolidated_into]
        )
        below = len(found.sources)
        found = replace(
            found,
            memory=shown[0],
            sources=tuple(shown[1 : 1 + below]),
            consolidated_into=tuple(shown[1 + below :]),
        )
        tokens = sum(m.tokens for m in (*found.sources, *found.consolidated_into))
        if tokens:
            self._meter(access, UsageEvent("inspect", "retrieval", tokens, session_id))
        return found

    def delete_ids(
        self, access: Access, ids: Sequence[str], derived: Derived = False, dry_run: bool = False
    ) -> tuple[DeleteOutcome, Counters]:
        """Delete by id; ``derived`` takes what was built from them too, or with "evidence"
        what their evidence supports (see ``store.memories.plan_delete``). A dry run changes
        nothing, so a read-only key may ask it."""
        if dry_run:
            access.require_read()
        else:
            access.require_write()
        unique = list(dict.fromkeys(ids))
        outcome = self._store.delete_ids(access.vault_id, unique, derived, dry_run)
        if outcome.tokens:
            self._meter(access, UsageEvent("delete-ids", "deletion", outcome.tokens))
        return outcome, self._store.counters(access.vault_id)

    def wipe(self, access: Access) -> tuple[int, Counters]:
        access.require_write()
        deleted = self._store.wipe(access.vault_id)
        return deleted, self._store.counters(access.vault_id)

    def debt(self, access: Access) -> Counters:
        return self._store.counters(access.vault_id)

    def stats(self, access: Access) -> Stats:
        access.require_read()
        return self._store.stats(access.vault_id)

    def preferences(self, access: Access) -> list[Memory]:
        """The vault's current standing preferences, most important and newest first."""
        access.require_read()
        return self._store.preferences(access.vault_id, limits.KINDS)

    def replaced(self, access: Access, memory_id: str) -> list[Memory]:
        """The reflections ``memory_id`` replaced (what its page says it replaced)."""
        access.require_read()
        return self._stored_by(access.vault_id, self._store.replaced(access.vault_id, memory_id))

    def timeline(self, access: Access, size: BucketSize) -> Timeline:
        """The vault's memories per day, week or month, by tier (not metered, like stats)."""
        access.require_read()
        days, last_reflection_ms = self._store.days_by_tier(access.vault_id)
        return Timeline(access.vault_ref, size, fold(days, size), last_reflection_ms)

    def usage(self, access: Access, from_ms: int, to_ms: int) -> list[UsageLine]:
        access.require_read()
        return self._store.usage(access.vault_id, from_ms, to_ms)

    # --- the server's reflector (docs/reflector.md) ------------------------------------

    def reflector_runs(self, access: Access) -> ReflectorRuns:
        access.require_read()
        return self._store.reflector_runs(access.vault_id)

    def may_reflect(self, access: Access) -> ReflectorRuns:
        """A run asked for now checks out and commits: a key that may do both."""
        access.require_full()
        return self._store.reflector_runs(access.vault_id)

    def claim_reflector(
        self, access: Access, holder: str, hold_ms: int, *, triggered: bool
    ) -> ReflectorRuns | None:
        """Hold the vault for one run of the server's reflector for ``hold_ms`` (see
        ``store/reflector.claim``); None when it may not run now."""
        access.require_full()
        now = self._clock()
        return self._store.claim_reflector(
            access.vault_id, holder, now, now + hold_ms, triggered=triggered
        )

    def finish_reflector(
        self, access: Access, holder: str, ended: RunOutcome, wait_ms: int
    ) -> None:
        """Release the hold; no triggered run for ``wait_ms`` (the cooldown, or the
        backoff after a failure)."""
        now = self._clock()
        self._store.finish_reflector(
            access.vault_id,
            holder,
            RunEnded(
                now, ended.outcome, now + wait_ms, ended.error, ended.batches, ended.reflections
            ),
        )
        spent = [
            event
            for sent, received in ended.calls
            for event in (
                UsageEvent(REFLECTOR_ENDPOINT, "provider_input", sent),
                UsageEvent(REFLECTOR_ENDPOINT, "provider_output", received),
            )
        ]
        self._store.record_usage(access.vault_id, spent, now)

    def enable_reflector(self, access: Access, enabled: bool) -> ReflectorRuns:
        """Whether the server's reflector may consolidate this vault (a read-write key)."""
        access.require_full()
        return self._store.enable_reflector(access.vault_id, enabled)

    def pending_embeddings(self, access: Access) -> int:
        return self._store.pending_embeddings(access.vault_id)

    def _supported(self, vault_id: str, hits: Sequence[ScoredMemory]) -> list[ScoredMemory]:
        """The hits with each reflection's support (how many of its sources are gone) and
        what stored each."""
        rows = self._stored_by(
            vault_id, self._store.with_support(vault_id, [h.memory for h in hits])
        )
        return [ScoredMemory(m, h.score) for m, h in zip(rows, hits, strict=True)]

    def _stored_by(self, vault_id: str, rows: Sequence[Memory]) -> list[Memory]:
        """``rows`` with what stored each (``stored_by``), whether a later reflection
        replaced them, and their kind (``superseded``, ``kind``)."""
        found = self._store.described(vault_id, [m.id for m in rows])
        described = []
        for m in rows:
            writer, superseded, kind = found.get(m.id, (None, None, None))
            described.append(replace(m, stored_by=writer, superseded=superseded, kind=kind))
        return described

    def _model_id(self, embeddings: str | None) -> str | None:
        """The vector space new rows are queued for (None: lexical only)."""
        embedder = self._embedders.get(self._embedders.resolve(embeddings))
        return None if embedder is None else embedder.model_id

    def vault_count(self) -> int:
        return self._store.vault_count()

    @property
    def shares_rate_limits(self) -> bool:
        return self._store.shares_rate_limits

    def take_token(self, caller: str, per_minute: int, burst: int) -> float | None:
        """Spend one of ``caller``'s tokens of the budget every server over this store
        shares (see :attr:`shares_rate_limits`): None, or the seconds to wait."""
        return self._store.take_token(caller, per_minute, burst)

    def backlog(self) -> Backlog:
        """Every vault of this store at once, for the operator's metrics (no key: counts and
        sums only, nothing of any one vault)."""
        return self._store.backlog(debt.RAW_DUE_TOKENS, limits.DEBT_THRESHOLD_IMPORTANCE)

    def now(self) -> int:
        return self._clock()

    def _meter(self, access: Access, event: UsageEvent) -> None:
        self._store.record_usage(access.vault_id, [event], self._clock())


@dataclass(frozen=True)
class DatePage:
    rows: tuple[ScoredMemory, ...]
    returned_from: int
    returned_to: int
    truncated: bool


def _budget(max_tokens: float) -> int:
    if not math.isfinite(max_tokens):
        raise InvalidRequest("max_tokens must be a finite number", {"field": "max_tokens"})
    return selection.clamp_budget(int(max_tokens))


def _returned(page: window.Page, start: int, end: int, order: Order) -> tuple[int, int]:
    """The part of the window a page covers: its open bound is where the next page starts."""
    if page.boundary is None:
        return start, end
    return (page.boundary, end) if order == "newest_first" else (start, page.boundary)
