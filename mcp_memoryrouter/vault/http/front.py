"""The vault's one way in: :class:`VaultAPI`, one typed method per operation (the wire model
in, the wire model out), behind one admission step, :meth:`VaultAPI.admit`.

Every call enters here: a REST request through its route (``api.py``, a thin adapter) and
the admission middleware (``boundary.Admission``), an embedded surface's call through the
in-process carrier (``inprocess.py``). Nothing else on the vault's HTTP side reaches the use
cases (``tests/test_layers.py``, the front door rule).

Admission, in the order the REST API has always answered in:

1. the rate limit: one token of the caller's bucket (its key's, the mode suffix stripped,
   else its address's), a 429 naming ``retry_after`` when it is empty;
2. the body's size: 413 above ``max_body_bytes``;
3. the key: the presented key becomes the :class:`Access` the operation acts with (401 when
   the vault does not accept it; 400 for a key header sent twice).

What the key may do with it (its mode, read-only) is the use case's to decide
(``VaultService``): some need depends on the body (a dry-run delete only reads), and a
request the wire model refuses is answered 400 before it.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from mcp_memoryrouter import __version__, limits, schemas
from mcp_memoryrouter.errors import Conflict, InvalidRequest, NotFound, too_large
from mcp_memoryrouter.vault.http import render
from mcp_memoryrouter.vault.http.ratelimit import UNLIMITED_PATHS, RateBuckets, caller, throttled
from mcp_memoryrouter.vault.rules.access import Access
from mcp_memoryrouter.vault.rules.dates import EARLIEST_MS, parse_moment
from mcp_memoryrouter.vault.rules.domain import (
    Backlog,
    Entry,
    ReflectorRuns,
    RunOutcome,
    SearchFilter,
    Tier,
)
from mcp_memoryrouter.vault.rules.prepare import budget_for
from mcp_memoryrouter.vault.rules.timeline import bucket_size
from mcp_memoryrouter.vault.service import IncomingMessage, VaultService

_DAY_MS = 86_400_000


@dataclass(frozen=True)
class Call:
    """One call at the door, as its carrier read it."""

    path: str
    key: str | None = None  # the key presented
    address: str | None = None  # where it comes from: a caller without a key is counted by it
    size: int | None = None  # the body's bytes, when known before it is read
    keyed: bool = True  # whether the operation acts with a key (every route under /v1/)
    unreadable: InvalidRequest | None = None  # why no key could be read (a header sent twice)
    # what the caller says it is (schemas.SURFACE_HEADER, CLIENT_HEADER): labels, checked
    surface: str | None = None
    client: str | None = None

    def presented(self) -> str | None:
        """The key, or the refusal of a key header sent twice, where a key is first needed."""
        if self.unreadable is not None:
            raise self.unreadable
        return self.key


class Consolidator(Protocol):
    """The server's own reflector as the front sees it (``reflector/``, wired by the
    composition root; :data:`NO_REFLECTOR` until then): whether the server has one, the
    notice of a write that left a debt suggestion, and a run asked for now."""

    configured: bool

    def noticed(self, access: Access) -> None:
        """A write by ``access`` (a key that may check out) left the vault with a debt
        suggestion: consolidate it in the background, when its cooldown allows. Returns at
        once, from any thread."""
        ...

    def run_now(self, access: Access, max_tokens: float | None) -> schemas.ConsolidateRunResponse:
        """Consolidate now, below the threshold too (called on a worker thread)."""
        ...


class NoReflector:
    """A server without a reflector (no ``MEMORYROUTER_REFLECTOR_URL``)."""

    configured = False

    def noticed(self, access: Access) -> None:
        return None

    def run_now(self, access: Access, max_tokens: float | None) -> schemas.ConsolidateRunResponse:
        raise Conflict(
            "this server has no reflector: its operator may give it a model "
            "(MEMORYROUTER_REFLECTOR_URL, docs/reflector.md); or consolidate with your own "
            "model: mcp-memoryrouter reflect --model-command '…'",
            {"reason": "no_reflector"},
        )


NO_REFLECTOR = NoReflector()


class VaultAPI:
    """The vault's operations, each after :meth:`admit` (see the module's docstring)."""

    def __init__(
        self,
        service: VaultService,
        *,
        store_kind: str,
        max_body_bytes: int,
        budgets: RateBuckets | None = None,
    ) -> None:
        """``budgets``: the rate limit's token buckets; None when calls are not limited."""
        self._service = service
        self.store_kind = store_kind
        self.max_body_bytes = max_body_bytes
        self.budgets = budgets
        self.consolidator: Consolidator = NO_REFLECTOR  # the composition root sets it
        # Admission runs on the event loop and on worker threads alike: buckets in memory
        # are taken from under this lock (buckets in the store, by one statement each).
        self._taking = threading.Lock()

    # --- admission ---------------------------------------------------------------------

    def admit(self, call: Call, admitted: Access | None = None) -> Access | None:
        """The one admission step: the rate limit, the body's size, the key, in that order.
        The :class:`Access` the call acts with, None for a call that acts with no key.

        ``admitted``: what this very key was admitted with earlier in the same request (the
        carrier's :class:`~mcp_memoryrouter.vault.http.inprocess.Admitted`), so the key is
        not looked up twice; the rate limit and the size are checked all the same."""
        budgets = self.budgets
        if budgets is not None and call.path not in UNLIMITED_PATHS:
            who = caller(call.presented(), call.address)
            refused = throttled(budgets, who, self._take(budgets, who))
            if refused is not None:
                raise refused
        if call.size is not None and call.size > self.max_body_bytes:
            raise too_large(self.max_body_bytes)
        if not call.keyed:
            return None
        access = admitted or self._service.authenticate(call.presented())
        return replace(
            access, surface=_surface(call.surface), client=schemas.client_label(call.client)
        )

    def _take(self, budgets: RateBuckets, who: str) -> float | None:
        if budgets.blocking:
            return budgets.take(who)
        with self._taking:
            return budgets.take(who)

    def blocks(self, call: Call) -> bool:
        """Whether :meth:`admit` waits on I/O for ``call`` (a key looked up, a token taken
        in the store), and so belongs on a worker thread."""
        if call.keyed:
            return True
        budgets = self.budgets
        return budgets is not None and budgets.blocking and call.path not in UNLIMITED_PATHS

    def backlog(self) -> Backlog:
        """Every vault of this store at once, for the operator's metrics (no key, no
        admission: counts and sums only, nothing of any one vault)."""
        return self._service.backlog()

    # --- operations: one per route -----------------------------------------------------

    def health(self) -> schemas.Health:
        return schemas.Health(status="ok", store=self.store_kind, version=__version__)

    def create_key(self, access: Access, body: schemas.KeyCreateRequest) -> schemas.KeyCreated:
        key, record = self._service.mint_key(access, body.name, body.read_only)
        return render.key_created(key, record)

    def list_keys(self, access: Access) -> schemas.KeyList:
        keys = self._service.keys.list_keys(access)
        return schemas.KeyList(vault=access.vault_ref, keys=[render.key(k) for k in keys])

    def revoke_key(self, access: Access, key_id: str) -> schemas.KeyRevoked:
        return schemas.KeyRevoked(id=self._service.keys.revoke_key(access, key_id).id)

    def key_info(self, access: Access) -> schemas.KeyInfo:
        return schemas.KeyInfo(vault=access.vault_ref, read_only=access.read_only, mode=access.mode)

    def ingest(
        self,
        access: Access,
        body: schemas.IngestRequest,
        *,
        session: str | None = None,
        model: str | None = None,
    ) -> schemas.IngestResponse:
        """``session``, ``model``: the request's ``X-Session-ID`` and ``X-Embedding-Model``
        (the body's own fields beat them; so does a message's own ``session_id``)."""
        messages = [
            IncomingMessage(
                m.role,
                m.content,
                None if m.date is None else parse_moment(m.date, field=f"messages[{i}].date"),
                m.session_id,
            )
            for i, m in enumerate(body.messages)
        ]
        outcome = self._service.ingest(
            access,
            messages,
            body.session_id or session,
            self._embeddings(body.embeddings, model),
            body.dedupe,
        )
        debt = render.reflection(outcome.counters)
        if debt.suggestion is not None and access.can_read and access.can_write:
            self.consolidator.noticed(access)
        return render.ingested(outcome.stored, outcome.ids, debt, outcome.similar, outcome.skipped)

    def search(
        self,
        access: Access,
        body: schemas.SearchRequest,
        *,
        session: str | None = None,
        model: str | None = None,
    ) -> schemas.SearchResponse:
        where = SearchFilter(_tiers(body.tiers), body.importance, body.session_id or session)
        hits, counters = self._service.search(
            access,
            body.query,
            body.limit,
            where,
            self._embeddings(body.embeddings, model),
            _as_of(body.as_of),
            body.current is True,
            body.kinds,
        )
        return schemas.SearchResponse(
            memories=[render.search_row(h) for h in hits], reflection=render.reflection(counters)
        )

    def prepare(
        self,
        access: Access,
        body: schemas.PrepareRequest,
        *,
        session: str | None = None,
        model: str | None = None,
    ) -> schemas.PrepareResponse:
        query, meaning = _prepare_query(body)
        budget = budget_for(body.density, body.context_limit, body.max_tokens)
        where = SearchFilter(_tiers(body.tiers), body.importance, body.session_id or session)
        (context, found, tokens), counters = self._service.prepare(
            access,
            query,
            budget,
            where,
            self._embeddings(body.embeddings, model),
            _as_of(body.as_of),
            meaning,
            body.stored_by,
            body.current is not False,
        )
        return schemas.PrepareResponse(
            context=context,
            memories_found=found,
            est_tokens=tokens,
            reflection=render.reflection(counters),
        )

    def date_search(
        self,
        access: Access,
        body: schemas.DateSearchRequest,
        *,
        session: str | None = None,
        model: str | None = None,
    ) -> schemas.DateSearchResponse:
        start = parse_moment(body.from_, field="from")
        end = self._until(body.to)
        where = SearchFilter(_tiers(body.tiers), body.importance, body.session_id or session)
        page, counters = self._service.date_search(
            access,
            start,
            end,
            body.query,
            where,
            body.max_tokens,
            body.order,
            self._embeddings(body.embeddings, model),
            body.current is True,
        )
        return schemas.DateSearchResponse(
            memories=[render.search_row(h) for h in page.rows],
            returned=render.covers(page.returned_from, page.returned_to),
            truncated=page.truncated,
            reflection=render.reflection(counters),
        )

    def checkout(
        self, access: Access, body: schemas.CheckoutRequest, *, session: str | None = None
    ) -> schemas.CheckoutResponse:
        session_id = body.session_id or session
        return render.checkout(
            self._service.checkout(access, body.tier, body.max_tokens, session_id, body.contract)
        )

    def commit(
        self,
        access: Access,
        body: schemas.CommitRequest,
        *,
        session: str | None = None,
        model: str | None = None,
    ) -> schemas.CommitResponse:
        entries = [entry_of(e) for e in body.entries]
        outcome, counters = self._service.commit(
            access,
            body.batch_id,
            entries,
            body.session_id or session,
            self._embeddings(body.embeddings, model),
        )
        return render.committed(outcome, counters)

    def import_reflections(
        self, access: Access, body: schemas.ImportReflectionsRequest
    ) -> schemas.ImportReflectionsResponse:
        covers = None
        if body.covers is not None:
            covers = (
                parse_moment(body.covers.from_, field="covers.from"),
                parse_moment(body.covers.to, field="covers.to"),
            )
        entries = [entry_of(e) for e in body.entries]
        created, counters = self._service.import_reflections(
            access,
            body.tier,
            entries,
            body.source_ids,
            covers,
            body.sources_deleted,
            _replaced(body.replaced, len(entries)),
        )
        return schemas.ImportReflectionsResponse(
            created=[schemas.CreatedReflection(id=c.id, importance=c.importance) for c in created],
            reflection=render.reflection(counters),
        )

    def import_consolidated(
        self, access: Access, body: schemas.MarkConsolidatedRequest
    ) -> schemas.MarkConsolidatedResponse:
        marked, counters = self._service.mark_consolidated(access, body.ids)
        return schemas.MarkConsolidatedResponse(
            marked=marked, reflection=render.reflection(counters)
        )

    def export(self, access: Access) -> Iterator[bytes]:
        """The vault as NDJSON lines, read from the store in pages as they are sent. Its
        first memory is read here, so a refused key fails before a line is."""
        exported = self._service.export(access)
        first = next(exported, None)
        if first is None:
            return iter(())
        return (
            (json.dumps(render.export_line(m), ensure_ascii=False) + "\n").encode()
            for m in itertools.chain([first], exported)
        )

    def inspect(
        self, access: Access, body: schemas.InspectRequest, *, session: str | None = None
    ) -> schemas.InspectResponse:
        session_id = body.session_id or session
        found = self._service.inspect(access, body.memory_id, body.offset, session_id, body.order)
        page = render.inspect(found, body.offset, limits.INSPECT_PAGE)
        if found.memory.tier > 1:
            earlier = self._service.replaced(access, found.memory.id)
            page.replaced = [render.lineage_row(m) for m in earlier] or None
        return page

    def delete_ids(
        self, access: Access, body: schemas.DeleteIdsRequest
    ) -> schemas.DeleteIdsResponse:
        outcome, counters = self._service.delete_ids(access, body.ids, body.derived, body.dry_run)
        return render.deleted(outcome, counters, listed=bool(body.derived) or body.dry_run)

    def wipe(self, access: Access) -> schemas.WipeResponse:
        deleted, counters = self._service.wipe(access)
        return schemas.WipeResponse(deleted=deleted, reflection=render.reflection(counters))

    def stats(self, access: Access) -> schemas.StatsResponse:
        service = self._service
        found = service.stats(access)
        preferences = len(service.preferences(access))
        return render.stats(
            found, service.pending_embeddings(access), self._reflector(access), preferences
        )

    # --- the server's reflector (docs/reflector.md) ------------------------------------

    def consolidate_run(
        self, access: Access, body: schemas.ConsolidateRunRequest
    ) -> schemas.ConsolidateRunResponse:
        """Consolidate this vault now with the server's reflector, below the threshold
        too: 409 when the server has none or the vault's owner turned it off."""
        runs = self._service.may_reflect(access)
        if self.consolidator.configured and not runs.enabled:
            raise Conflict(
                "the server's reflector is off for this vault (its owner consolidates with "
                "their own model): turn it on with POST /v1/memory/consolidate/server "
                '{"enabled": true} or mcp-memoryrouter server-reflector on',
                {"reason": "opted_out"},
            )
        return self.consolidator.run_now(access, body.max_tokens)

    def server_reflector(self, access: Access) -> schemas.ServerReflector:
        return self._reflector(access)

    def set_server_reflector(
        self, access: Access, body: schemas.ServerReflectorRequest
    ) -> schemas.ServerReflector:
        """Turn the server's reflector on or off for this vault (a read-write key)."""
        runs = self._service.enable_reflector(access, body.enabled)
        return render.server_reflector(runs, self.consolidator.configured, self._service.now())

    def claim_reflector(
        self, access: Access, holder: str, hold_ms: int, *, triggered: bool
    ) -> ReflectorRuns | None:
        """The reflector's hold on the vault for one run (no route: the server's own)."""
        return self._service.claim_reflector(access, holder, hold_ms, triggered=triggered)

    def finish_reflector(
        self, access: Access, holder: str, ended: RunOutcome, wait_ms: int
    ) -> None:
        self._service.finish_reflector(access, holder, ended, wait_ms)

    def _reflector(self, access: Access) -> schemas.ServerReflector:
        runs = self._service.reflector_runs(access)
        return render.server_reflector(runs, self.consolidator.configured, self._service.now())

    def timeline(self, access: Access, bucket: str = "month") -> schemas.TimelineResponse:
        return render.timeline(self._service.timeline(access, bucket_size(bucket)))

    def usage(
        self, access: Access, from_: str | None = None, to: str | None = None
    ) -> schemas.UsageResponse:
        """``from`` defaults to 30 days before ``to`` (and ``to`` to now)."""
        end = self._until(to)
        # 30 days before ``to``, but no earlier than 0001-01-01, the first day written for
        default_start = max(end - 30 * _DAY_MS, EARLIEST_MS)
        start = default_start if from_ is None else parse_moment(from_, field="from")
        return render.usage(access.vault_ref, self._service.usage(access, start, end), start, end)

    # --- what the operations share -----------------------------------------------------

    def _embeddings(self, chosen: str | None, header: str | None) -> str | None:
        """The embedding model a request names: its body's ``embeddings``, else its
        ``X-Embedding-Model`` header. Either naming no model of this server is refused
        (400), even when the request needs no embedding."""
        for name in (chosen, header):
            self._service.embedders.resolve(name)
        return chosen or header

    def _until(self, to: str | None) -> int:
        """The end of a window: the whole day ``to`` names, else now."""
        return self._service.now() if to is None else parse_moment(to, field="to", end_of_day=True)


def _surface(named: str | None) -> schemas.Surface:
    """The surface a call names (``rest`` when it names none); one not in the closed list
    is refused (400), so nothing is written under a label no reader knows."""
    if named is None:
        return "rest"
    for surface in schemas.SURFACES:
        if named == surface:
            return surface
    raise InvalidRequest(
        f"the {schemas.SURFACE_HEADER} header names no surface of this vault: send one of "
        f"{', '.join(schemas.SURFACES)}, or leave it out (rest)",
        {"field": schemas.SURFACE_HEADER, "allowed": list(schemas.SURFACES)},
    )


def _tiers(tiers: list[int] | None) -> tuple[Tier, ...] | None:
    return None if tiers is None else tuple(t for t in (1, 2, 3) if t in tiers)


def _as_of(text: str | None) -> int | None:
    """When the question is asked, for the time it names (None: now)."""
    return None if text is None else parse_moment(text, field="as_of")


def _prepare_query(body: schemas.PrepareRequest) -> tuple[str, str | None]:
    """What prepare searches by (its text, and the text the model embeds when that differs)."""
    if body.query is not None:
        return body.query, None
    if not body.messages:
        raise InvalidRequest("give query or messages", {"field": "query"})
    # BM25 reads the last three messages; the model embeds the newest alone (it reads 128
    # tokens from the start: three turns, oldest first, would cut the question off)
    last = body.messages[-limits.PREPARE_QUERY_MESSAGES :]
    query = "\n\n".join(f"[{m.role.upper()}] {m.content}" for m in last)
    return query, last[-1].content


def _replaced(replaced: Sequence[schemas.ReplacedIn], entries: int) -> list[tuple[str, int, int]]:
    """An import's replaced reflections as (id, when in ms, entry index)."""
    for i, r in enumerate(replaced):
        if r.entry >= entries:  # a reference into the request that resolves to nothing
            raise NotFound(
                f"replaced[{i}].entry is {r.entry}, and the request holds {entries} entries: "
                "name an entry by its index from 0",
                {"field": f"replaced[{i}].entry"},
            )
    return [
        (r.id, parse_moment(r.at, field=f"replaced[{i}].at"), r.entry)
        for i, r in enumerate(replaced)
    ]


def entry_of(body: schemas.EntryIn) -> Entry:
    """A committed entry as the vault reads it (what contract 2 adds, when given)."""
    return Entry(
        body.text,
        body.importance,
        tuple(body.replaces),
        tuple(body.cites),
        body.kind,
    )
