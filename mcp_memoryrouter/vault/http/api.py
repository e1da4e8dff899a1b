"""The REST routes under ``/v1``: each parses its wire model and hands it to the vault's
front (``front.VaultAPI``), after the admission middleware (``boundary.Admission``) let the
request in."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.convertors import StringConvertor, register_url_convertor

from mcp_memoryrouter import schemas
from mcp_memoryrouter.vault.http.boundary import ACCESS_STATE
from mcp_memoryrouter.vault.http.front import VaultAPI
from mcp_memoryrouter.vault.rules.access import Access

_ERRORS: dict[int | str, dict[str, object]] = {
    code: {"model": schemas.ErrorEnvelope} for code in (400, 401, 403, 404, 405, 409, 413, 429, 503)
}
_ERRORS[429]["headers"] = {
    "Retry-After": {
        "description": "Whole seconds until the key may send another request.",
        "schema": {"type": "integer", "minimum": 1},
    }
}
_ERRORS[503]["headers"] = {
    "Retry-After": {
        "description": "Whole seconds to wait while the database cannot answer (a restart "
        "or a failover): the request changed nothing.",
        "schema": {"type": "integer", "minimum": 1},
    }
}


class VaultApp(FastAPI):
    """The REST API of one vault: the routes below, adapters of :attr:`front`."""

    def __init__(self, front: VaultAPI, **options: Any) -> None:
        super().__init__(**options)
        self.front = front


# Handlers and dependencies that do no I/O are ``async``: FastAPI runs a plain ``def`` on a
# worker thread, a hop that cost more CPU than the work (docs/benchmarks.md, "The cost of a
# call"). Whatever reads or writes the store stays a plain ``def``.


async def get_front(request: Request) -> VaultAPI:
    app = request.app
    if not isinstance(app, VaultApp):
        raise TypeError("the vault's routes are served by a VaultApp")
    return app.front


Front = Annotated[VaultAPI, Depends(get_front)]


async def get_access(
    request: Request,
    # Declared for the OpenAPI document; the key is read from the raw headers, by the one
    # rule the rate limit reads it by too (``presented.presented_key``), on admission.
    x_memory_key: Annotated[str | None, Header()] = None,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
    # Declared for the document too, read on admission: what the caller says stored what it
    # writes (a label from a closed list, default rest) and its client's name
    # (percent-encoded UTF-8); the key id is what the vault vouches for (docs/api.md).
    x_memoryrouter_surface: Annotated[
        schemas.Surface | None, Header(alias=schemas.SURFACE_HEADER)
    ] = None,
    x_memoryrouter_client: Annotated[str | None, Header(alias=schemas.CLIENT_HEADER)] = None,
) -> Access:
    """What the request was admitted with (``boundary.Admission``, before its body was
    read)."""
    access = request.scope.get("state", {}).get(ACCESS_STATE)
    if not isinstance(access, Access):
        raise TypeError("a route under /v1/ ran without admission")
    return access


Key = Annotated[Access, Depends(get_access)]
SessionHeader = Annotated[str | None, Header(alias="X-Session-ID", max_length=200)]
ModelHeader = Annotated[str | None, Header(alias="X-Embedding-Model", max_length=100)]


class KeyIdConvertor(StringConvertor):
    """A key id in a path: any segment but ``current``, so ``/v1/keys/current`` is its own
    resource (``GET`` only; other methods are 405), as the OpenAPI document says."""

    regex = "(?!current$)[^/]+"


register_url_convertor("key_id", KeyIdConvertor())

router = APIRouter(responses=_ERRORS)


@router.get("/healthz", response_model=schemas.Health, tags=["ops"])
async def healthz(front: Front) -> schemas.Health:
    return front.health()


@router.post("/v1/keys", status_code=201, response_model=schemas.KeyCreated, tags=["keys"])
def create_key(body: schemas.KeyCreateRequest, access: Key, front: Front) -> schemas.KeyCreated:
    return front.create_key(access, body)


@router.get("/v1/keys", response_model=schemas.KeyList, tags=["keys"])
def list_keys(access: Key, front: Front) -> schemas.KeyList:
    """The vault's keys, never their secrets (a read-write key of the vault may ask)."""
    return front.list_keys(access)


@router.delete("/v1/keys/{key_id:key_id}", response_model=schemas.KeyRevoked, tags=["keys"])
def revoke_key(key_id: str, access: Key, front: Front) -> schemas.KeyRevoked:
    """Revoke a key by its id: its next request is 401. The vault's last read-write key is
    refused with 409 (mint another first)."""
    return front.revoke_key(access, key_id)


@router.get("/v1/keys/current", response_model=schemas.KeyInfo, tags=["keys"])
async def current_key(access: Key, front: Front) -> schemas.KeyInfo:
    """The vault reference and permissions of the presented key (any mode may ask)."""
    return front.key_info(access)


@router.post(
    "/v1/memory/ingest", status_code=202, response_model=schemas.IngestResponse, tags=["memory"]
)
def ingest(
    body: schemas.IngestRequest,
    access: Key,
    front: Front,
    x_session_id: SessionHeader = None,
    x_embedding_model: ModelHeader = None,
) -> schemas.IngestResponse:
    return front.ingest(access, body, session=x_session_id, model=x_embedding_model)


@router.post("/v1/memory/search", response_model=schemas.SearchResponse, tags=["memory"])
def search(
    body: schemas.SearchRequest,
    access: Key,
    front: Front,
    x_session_id: SessionHeader = None,
    x_embedding_model: ModelHeader = None,
) -> schemas.SearchResponse:
    return front.search(access, body, session=x_session_id, model=x_embedding_model)


@router.post("/v1/memory/prepare", response_model=schemas.PrepareResponse, tags=["memory"])
def prepare(
    body: schemas.PrepareRequest,
    access: Key,
    front: Front,
    x_session_id: SessionHeader = None,
    x_embedding_model: ModelHeader = None,
) -> schemas.PrepareResponse:
    """A ready-to-inject context block for the conversation: insight, reflections and exact
    moments, each line dated, within the density's budget, quoted as data. By default it
    holds only what a current key stored in full mode (``stored_by``)."""
    return front.prepare(access, body, session=x_session_id, model=x_embedding_model)


@router.post("/v1/memory/date-search", response_model=schemas.DateSearchResponse, tags=["memory"])
def date_search(
    body: schemas.DateSearchRequest,
    access: Key,
    front: Front,
    x_session_id: SessionHeader = None,
    x_embedding_model: ModelHeader = None,
) -> schemas.DateSearchResponse:
    """Time-first retrieval of a window; follow ``returned`` to page through it."""
    return front.date_search(access, body, session=x_session_id, model=x_embedding_model)


@router.post(
    "/v1/memory/consolidate/checkout", response_model=schemas.CheckoutResponse, tags=["reflect"]
)
def checkout(
    body: schemas.CheckoutRequest, access: Key, front: Front, x_session_id: SessionHeader = None
) -> schemas.CheckoutResponse:
    return front.checkout(access, body, session=x_session_id)


@router.post(
    "/v1/memory/consolidate/commit", response_model=schemas.CommitResponse, tags=["reflect"]
)
def commit(
    body: schemas.CommitRequest,
    access: Key,
    front: Front,
    x_session_id: SessionHeader = None,
    x_embedding_model: ModelHeader = None,
) -> schemas.CommitResponse:
    return front.commit(access, body, session=x_session_id, model=x_embedding_model)


@router.post(
    "/v1/memory/consolidate/run",
    response_model=schemas.ConsolidateRunResponse,
    tags=["reflect"],
    responses={502: {"model": schemas.ErrorEnvelope}},
)
def consolidate_run(
    body: schemas.ConsolidateRunRequest, access: Key, front: Front
) -> schemas.ConsolidateRunResponse:
    """Consolidate this vault now with the server's reflector (docs/reflector.md), below
    the debt threshold too: at most three batches of ``max_tokens`` each. 409 when the
    server has no reflector, the vault's owner turned it off, or a run holds the vault;
    502 when the model provider failed and nothing was committed."""
    return front.consolidate_run(access, body)


@router.get(
    "/v1/memory/consolidate/server", response_model=schemas.ServerReflector, tags=["reflect"]
)
def server_reflector(access: Key, front: Front) -> schemas.ServerReflector:
    """The server's reflector and this vault: whether it may consolidate it, and its last
    run."""
    return front.server_reflector(access)


@router.post(
    "/v1/memory/consolidate/server", response_model=schemas.ServerReflector, tags=["reflect"]
)
def set_server_reflector(
    body: schemas.ServerReflectorRequest, access: Key, front: Front
) -> schemas.ServerReflector:
    """Turn the server's reflector on or off for this vault (a read-write key): a vault
    whose owner consolidates with their own model is never also consolidated by the
    server."""
    return front.set_server_reflector(access, body)


@router.post(
    "/v1/memory/import-reflections",
    response_model=schemas.ImportReflectionsResponse,
    tags=["reflect"],
)
def import_reflections(
    body: schemas.ImportReflectionsRequest, access: Key, front: Front
) -> schemas.ImportReflectionsResponse:
    """Recreate exported reflections at ``tier`` with lineage to ``source_ids`` (already in
    the vault, one tier below, unconsolidated). Coverage is ``covers`` when given, else the
    sources' window. Used by ``mcp-memoryrouter import``; models never call it."""
    return front.import_reflections(access, body)


@router.post(
    "/v1/memory/import-consolidated",
    response_model=schemas.MarkConsolidatedResponse,
    tags=["reflect"],
)
def import_consolidated(
    body: schemas.MarkConsolidatedRequest, access: Key, front: Front
) -> schemas.MarkConsolidatedResponse:
    """Mark raw memories and tier-2 reflections consolidated, as an export recorded them
    (their reflection was deleted since). Used by ``mcp-memoryrouter import``."""
    return front.import_consolidated(access, body)


@router.get(
    "/v1/memory/export",
    tags=["memory"],
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
def export(access: Key, front: Front) -> StreamingResponse:
    """The whole vault as NDJSON, one memory a line, every tier with its lineage, session
    ids and consolidated flags (docs/backup.md); streamed, read from the store in pages."""
    return StreamingResponse(front.export(access), media_type="application/x-ndjson")


@router.post("/v1/memory/inspect", response_model=schemas.InspectResponse, tags=["memory"])
def inspect(
    body: schemas.InspectRequest, access: Key, front: Front, x_session_id: SessionHeader = None
) -> schemas.InspectResponse:
    return front.inspect(access, body, session=x_session_id)


@router.post("/v1/memory/delete-ids", response_model=schemas.DeleteIdsResponse, tags=["memory"])
def delete_ids(
    body: schemas.DeleteIdsRequest, access: Key, front: Front
) -> schemas.DeleteIdsResponse:
    return front.delete_ids(access, body)


@router.delete("/v1/memory", response_model=schemas.WipeResponse, tags=["memory"])
def wipe(access: Key, front: Front) -> schemas.WipeResponse:
    return front.wipe(access)


@router.get("/v1/memory/stats", response_model=schemas.StatsResponse, tags=["memory"])
def stats(access: Key, front: Front) -> schemas.StatsResponse:
    return front.stats(access)


@router.get("/v1/memory/timeline", response_model=schemas.TimelineResponse, tags=["memory"])
def timeline(
    access: Key, front: Front, bucket: Annotated[str, Query()] = "month"
) -> schemas.TimelineResponse:
    """How many memories the vault holds per ``bucket`` (day, week or month) and tier, by
    each memory's date (a reflection's: the start of its coverage); non-empty buckets only,
    oldest first. Any key that may read may ask; not metered."""
    return front.timeline(access, bucket)


@router.get("/v1/usage", response_model=schemas.UsageResponse, tags=["usage"])
def usage(
    access: Key,
    front: Front,
    from_: Annotated[str | None, Query(alias="from")] = None,
    to: Annotated[str | None, Query()] = None,
) -> schemas.UsageResponse:
    """Metered events by endpoint and session; ``from`` defaults to 30 days before ``to``.
    A period whose ``from`` is after its ``to`` holds no events (JSON Schema cannot compare
    the two, so the document allows it)."""
    return front.usage(access, from_, to)
