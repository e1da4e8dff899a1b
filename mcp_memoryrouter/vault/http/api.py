"""The REST routes under ``/v1``: parse the wire model, call the service, render."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.convertors import StringConvertor, register_url_convertor

from mcp_memoryrouter import __version__, limits, schemas
from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.vault.http import render
from mcp_memoryrouter.vault.http.boundary import ACCESS_STATE
from mcp_memoryrouter.vault.http.presented import presented_key
from mcp_memoryrouter.vault.rules.access import Access
from mcp_memoryrouter.vault.rules.dates import EARLIEST_MS, format_ms, parse_moment
from mcp_memoryrouter.vault.rules.domain import Entry, SearchFilter, Tier
from mcp_memoryrouter.vault.rules.prepare import budget_for
from mcp_memoryrouter.vault.rules.timeline import bucket_size
from mcp_memoryrouter.vault.service import IncomingMessage, VaultService

_DAY_MS = 86_400_000
_ERRORS: dict[int | str, dict[str, object]] = {
    code: {"model": schemas.ErrorEnvelope} for code in (400, 401, 403, 404, 405, 409, 413, 429, 503)
}
_ERRORS[429]["headers"] = {
    "Retry-After": {
        "description": "Whole seconds until the key may send another request.",
        "schema": {"type": "integer", "minimum": 1},
    }
}


# Handlers and dependencies that do no I/O are ``async``: FastAPI runs a plain ``def`` on a
# worker thread, a hop that cost more CPU than the work (docs/benchmarks.md, "The cost of a
# call"). Whatever reads or writes the store stays a plain ``def``.


async def get_service(request: Request) -> VaultService:
    service: VaultService = request.app.state.service
    return service


Service = Annotated[VaultService, Depends(get_service)]


async def get_store_kind(request: Request) -> str:
    kind: str = request.app.state.store_kind
    return kind


StoreKind = Annotated[str, Depends(get_store_kind)]


def get_access(
    request: Request,
    service: Service,
    # Declared for the OpenAPI document; the key is read from the raw headers by the one
    # rule the rate limit reads it by too (``presented.presented_key``).
    x_memory_key: Annotated[str | None, Header()] = None,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
) -> Access:
    admitted = request.scope.get("state", {}).get(ACCESS_STATE)  # checked before its body
    if isinstance(admitted, Access):
        return admitted
    return service.authenticate(presented_key(request.scope["headers"]))


Key = Annotated[Access, Depends(get_access)]
SessionHeader = Annotated[str | None, Header(alias="X-Session-ID", max_length=200)]
ModelHeader = Annotated[str | None, Header(alias="X-Embedding-Model", max_length=100)]


def _embeddings(service: VaultService, chosen: str | None, header: str | None) -> str | None:
    """The embedding model a request names: its body's ``embeddings``, else its
    ``X-Embedding-Model`` header. Either naming no model of this server is refused (400),
    even when the request needs no embedding."""
    for name in (chosen, header):
        service.embedders.resolve(name)
    return chosen or header


class KeyIdConvertor(StringConvertor):
    """A key id in a path: any segment but ``current``, so ``/v1/keys/current`` is its own
    resource (``GET`` only; other methods are 405), as the OpenAPI document says."""

    regex = "(?!current$)[^/]+"


register_url_convertor("key_id", KeyIdConvertor())

router = APIRouter(responses=_ERRORS)


def _tiers(tiers: list[int] | None) -> tuple[Tier, ...] | None:
    return None if tiers is None else tuple(t for t in (1, 2, 3) if t in tiers)


@router.get("/healthz", response_model=schemas.Health, tags=["ops"])
async def healthz(store_kind: StoreKind) -> schemas.Health:
    return schemas.Health(status="ok", store=store_kind, version=__version__)


@router.post("/v1/keys", status_code=201, response_model=schemas.KeyCreated, tags=["keys"])
def create_key(body: schemas.KeyCreateRequest, access: Key, service: Service) -> schemas.KeyCreated:
    key, record = service.mint_key(access, body.name, body.read_only)
    return schemas.KeyCreated(
        id=record.id,
        key=key,
        name=record.name,
        read_only=record.read_only,
        created_at=format_ms(record.created_ms),
    )


@router.get("/v1/keys", response_model=schemas.KeyList, tags=["keys"])
def list_keys(access: Key, service: Service) -> schemas.KeyList:
    """The vault's keys, never their secrets (a read-write key of the vault may ask)."""
    return schemas.KeyList(
        vault=access.vault_ref, keys=[render.key(k) for k in service.keys.list_keys(access)]
    )


@router.delete("/v1/keys/{key_id:key_id}", response_model=schemas.KeyRevoked, tags=["keys"])
def revoke_key(key_id: str, access: Key, service: Service) -> schemas.KeyRevoked:
    """Revoke a key by its id: its next request is 401. The vault's last read-write key is
    refused with 409 (mint another first)."""
    return schemas.KeyRevoked(id=service.keys.revoke_key(access, key_id).id)


@router.get("/v1/keys/current", response_model=schemas.KeyInfo, tags=["keys"])
async def current_key(access: Key) -> schemas.KeyInfo:
    """The vault reference and permissions of the presented key (any mode may ask)."""
    return schemas.KeyInfo(vault=access.vault_ref, read_only=access.read_only, mode=access.mode)


@router.post(
    "/v1/memory/ingest", status_code=202, response_model=schemas.IngestResponse, tags=["memory"]
)
def ingest(
    body: schemas.IngestRequest,
    access: Key,
    service: Service,
    x_session_id: SessionHeader = None,
    x_embedding_model: ModelHeader = None,
) -> schemas.IngestResponse:
    messages = [
        IncomingMessage(
            m.role,
            m.content,
            None if m.date is None else parse_moment(m.date, field=f"messages[{i}].date"),
            m.session_id,
        )
        for i, m in enumerate(body.messages)
    ]
    outcome = service.ingest(
        access,
        messages,
        body.session_id or x_session_id,  # a message's own session_id beats both
        _embeddings(service, body.embeddings, x_embedding_model),
    )
    return schemas.IngestResponse(
        stored=outcome.stored,
        duplicates=outcome.duplicates,
        ids=outcome.ids,
        reflection=render.reflection(outcome.counters),
    )


@router.post("/v1/memory/search", response_model=schemas.SearchResponse, tags=["memory"])
def search(
    body: schemas.SearchRequest,
    access: Key,
    service: Service,
    x_session_id: SessionHeader = None,
    x_embedding_model: ModelHeader = None,
) -> schemas.SearchResponse:
    where = SearchFilter(_tiers(body.tiers), body.importance, body.session_id or x_session_id)
    hits, counters = service.search(
        access,
        body.query,
        body.limit,
        where,
        _embeddings(service, body.embeddings, x_embedding_model),
        _as_of(body.as_of),
    )
    return schemas.SearchResponse(
        memories=[render.search_row(h) for h in hits], reflection=render.reflection(counters)
    )


@router.post("/v1/memory/prepare", response_model=schemas.PrepareResponse, tags=["memory"])
def prepare(
    body: schemas.PrepareRequest,
    access: Key,
    service: Service,
    x_session_id: SessionHeader = None,
    x_embedding_model: ModelHeader = None,
) -> schemas.PrepareResponse:
    """A ready-to-inject context block for the conversation: insight, reflections and exact
    moments, each line dated, within the density's budget, quoted as data. By default it
    holds only what a current key stored in full mode (``stored_by``)."""
    meaning = None
    if body.query is not None:
        query = body.query
    elif body.messages:
        # BM25 reads the last three messages; the model embeds the newest alone (it reads
        # 128 tokens from the start: three turns, oldest first, would cut the question off)
        last = body.messages[-limits.PREPARE_QUERY_MESSAGES :]
        query = "\n\n".join(f"[{m.role.upper()}] {m.content}" for m in last)
        meaning = last[-1].content
    else:
        raise InvalidRequest("give query or messages", {"field": "query"})
    budget = budget_for(body.density, body.context_limit, body.max_tokens)
    where = SearchFilter(_tiers(body.tiers), body.importance, body.session_id or x_session_id)
    (context, found, tokens), counters = service.prepare(
        access,
        query,
        budget,
        where,
        _embeddings(service, body.embeddings, x_embedding_model),
        _as_of(body.as_of),
        meaning,
        body.stored_by,
    )
    return schemas.PrepareResponse(
        context=context,
        memories_found=found,
        est_tokens=tokens,
        reflection=render.reflection(counters),
    )


def _as_of(text: str | None) -> int | None:
    """When the question is asked, for the time it names (None: now)."""
    return None if text is None else parse_moment(text, field="as_of")


@router.post("/v1/memory/date-search", response_model=schemas.DateSearchResponse, tags=["memory"])
def date_search(
    body: schemas.DateSearchRequest,
    access: Key,
    service: Service,
    x_session_id: SessionHeader = None,
    x_embedding_model: ModelHeader = None,
) -> schemas.DateSearchResponse:
    """Time-first retrieval of a window; follow ``returned`` to page through it."""
    start = parse_moment(body.from_, field="from")
    end = service.now() if body.to is None else parse_moment(body.to, field="to", end_of_day=True)
    where = SearchFilter(_tiers(body.tiers), body.importance, body.session_id or x_session_id)
    page, counters = service.date_search(
        access,
        start,
        end,
        body.query,
        where,
        body.max_tokens,
        body.order,
        _embeddings(service, body.embeddings, x_embedding_model),
    )
    return schemas.DateSearchResponse(
        memories=[render.search_row(h) for h in page.rows],
        returned=render.covers(page.returned_from, page.returned_to),
        truncated=page.truncated,
        reflection=render.reflection(counters),
    )


@router.post(
    "/v1/memory/consolidate/checkout", response_model=schemas.CheckoutResponse, tags=["reflect"]
)
def checkout(
    body: schemas.CheckoutRequest, access: Key, service: Service, x_session_id: SessionHeader = None
) -> schemas.CheckoutResponse:
    result = service.checkout(access, body.tier, body.max_tokens, body.session_id or x_session_id)
    return render.checkout(result)


@router.post(
    "/v1/memory/consolidate/commit", response_model=schemas.CommitResponse, tags=["reflect"]
)
def commit(
    body: schemas.CommitRequest,
    access: Key,
    service: Service,
    x_session_id: SessionHeader = None,
    x_embedding_model: ModelHeader = None,
) -> schemas.CommitResponse:
    entries = [Entry(e.text, e.importance) for e in body.entries]
    outcome, counters = service.commit(
        access,
        body.batch_id,
        entries,
        body.session_id or x_session_id,
        _embeddings(service, body.embeddings, x_embedding_model),
    )
    return schemas.CommitResponse(
        batch_id=outcome.batch_id,
        committed=True,
        already_committed=outcome.already_committed,
        tier=outcome.target_tier,
        created=[
            schemas.CreatedReflection(id=c.id, importance=c.importance) for c in outcome.created
        ],
        sources_consolidated=outcome.sources_consolidated,
        reflection=render.reflection(counters),
    )


@router.post(
    "/v1/memory/import-reflections",
    response_model=schemas.ImportReflectionsResponse,
    tags=["reflect"],
)
def import_reflections(
    body: schemas.ImportReflectionsRequest, access: Key, service: Service
) -> schemas.ImportReflectionsResponse:
    """Recreate exported reflections at ``tier`` with lineage to ``source_ids`` (already in
    the vault, one tier below, unconsolidated). Coverage is ``covers`` when given, else the
    sources' window. Used by ``mcp-memoryrouter import``; models never call it."""
    covers = None
    if body.covers is not None:
        covers = (
            parse_moment(body.covers.from_, field="covers.from"),
            parse_moment(body.covers.to, field="covers.to"),
        )
    entries = [Entry(e.text, e.importance) for e in body.entries]
    created, counters = service.import_reflections(
        access, body.tier, entries, body.source_ids, covers, body.sources_deleted
    )
    return schemas.ImportReflectionsResponse(
        created=[schemas.CreatedReflection(id=c.id, importance=c.importance) for c in created],
        reflection=render.reflection(counters),
    )


@router.post(
    "/v1/memory/import-consolidated",
    response_model=schemas.MarkConsolidatedResponse,
    tags=["reflect"],
)
def import_consolidated(
    body: schemas.MarkConsolidatedRequest, access: Key, service: Service
) -> schemas.MarkConsolidatedResponse:
    """Mark raw memories and tier-2 reflections consolidated, as an export recorded them
    (their reflection was deleted since). Used by ``mcp-memoryrouter import``."""
    marked, counters = service.mark_consolidated(access, body.ids)
    return schemas.MarkConsolidatedResponse(marked=marked, reflection=render.reflection(counters))


@router.get(
    "/v1/memory/export",
    tags=["memory"],
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
def export(access: Key, service: Service) -> StreamingResponse:
    """The whole vault as NDJSON, one memory a line, every tier with its lineage, session
    ids and consolidated flags (docs/backup.md); streamed, read from the store in pages."""
    lines = service.export(access)
    first = next(lines, None)  # a refused key fails here, before the 200 is sent

    def body() -> Iterator[bytes]:
        if first is None:
            return
        for exported in itertools.chain([first], lines):
            yield (json.dumps(render.export_line(exported), ensure_ascii=False) + "\n").encode()

    return StreamingResponse(body(), media_type="application/x-ndjson")


@router.post("/v1/memory/inspect", response_model=schemas.InspectResponse, tags=["memory"])
def inspect(
    body: schemas.InspectRequest, access: Key, service: Service, x_session_id: SessionHeader = None
) -> schemas.InspectResponse:
    session = body.session_id or x_session_id
    found = service.inspect(access, body.memory_id, body.offset, session, body.order)
    return render.inspect(found, body.offset, limits.INSPECT_PAGE)


@router.post("/v1/memory/delete-ids", response_model=schemas.DeleteIdsResponse, tags=["memory"])
def delete_ids(
    body: schemas.DeleteIdsRequest, access: Key, service: Service
) -> schemas.DeleteIdsResponse:
    outcome, counters = service.delete_ids(access, body.ids, body.derived, body.dry_run)
    return render.deleted(outcome, counters, listed=body.derived or body.dry_run)


@router.delete("/v1/memory", response_model=schemas.WipeResponse, tags=["memory"])
def wipe(access: Key, service: Service) -> schemas.WipeResponse:
    deleted, counters = service.wipe(access)
    return schemas.WipeResponse(deleted=deleted, reflection=render.reflection(counters))


@router.get("/v1/memory/stats", response_model=schemas.StatsResponse, tags=["memory"])
def stats(access: Key, service: Service) -> schemas.StatsResponse:
    return render.stats(service.stats(access), service.pending_embeddings(access))


@router.get("/v1/memory/timeline", response_model=schemas.TimelineResponse, tags=["memory"])
def timeline(
    access: Key, service: Service, bucket: Annotated[str, Query()] = "month"
) -> schemas.TimelineResponse:
    """How many memories the vault holds per ``bucket`` (day, week or month) and tier, by
    each memory's date (a reflection's: the start of its coverage); non-empty buckets only,
    oldest first. Any key that may read may ask; not metered."""
    return render.timeline(service.timeline(access, bucket_size(bucket)))


@router.get("/v1/usage", response_model=schemas.UsageResponse, tags=["usage"])
def usage(
    access: Key,
    service: Service,
    from_: Annotated[str | None, Query(alias="from")] = None,
    to: Annotated[str | None, Query()] = None,
) -> schemas.UsageResponse:
    """Metered events by endpoint and session; ``from`` defaults to 30 days before ``to``.
    A period whose ``from`` is after its ``to`` holds no events (JSON Schema cannot compare
    the two, so the document allows it)."""
    end = service.now() if to is None else parse_moment(to, field="to", end_of_day=True)
    # 30 days before ``to``, but no earlier than 0001-01-01, the first day a date is written for
    default_start = max(end - 30 * _DAY_MS, EARLIEST_MS)
    start = default_start if from_ is None else parse_moment(from_, field="from")
    return render.usage(access.vault_ref, service.usage(access, start, end), start, end)
