"""The vault called in process, without HTTP: what the embedded server's surfaces use (the
MCP tools, the chat proxy, the explorer).

A surface's :class:`~mcp_memoryrouter.client.VaultClient` hands its wire model to
:class:`InProcess`, which finds the operation in an explicit table (method and path → the
front's method) and calls it after the front's one admission step, as a REST request is:
the same rate limit (the same buckets, the caller named by the same rule: its key, else the
loopback address), the same body limit (measured on the body as the HTTP client encodes it),
the same key check, and the same error for anything unexpected. What it skips is the cost of
the hop: encoding to bytes and back, the ASGI and FastAPI layers (an in-process HTTP call
cost ~2.5 ms of CPU; see docs/benchmarks.md, "The cost of a call"). A call it has no entry
for (a path parameter, a query string, the streamed export) is not offered, and the client
sends that call over HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import anyio.to_thread
from pydantic import BaseModel

from mcp_memoryrouter import schemas
from mcp_memoryrouter.errors import MemoryRouterError
from mcp_memoryrouter.vault.http.boundary import unexpected
from mcp_memoryrouter.vault.http.front import Call, VaultAPI
from mcp_memoryrouter.vault.rules.access import Access
from mcp_memoryrouter.vault.rules.domain import RunOutcome

M = TypeVar("M", bound=BaseModel)
B = TypeVar("B", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)
LOOPBACK = "127.0.0.1"  # the address an in-process HTTP call presents without a key


@dataclass(frozen=True)
class Operation:
    """How the carrier runs one route's operation: ``run(front, access, body)``."""

    run: Callable[[VaultAPI, Access | None, BaseModel | None], BaseModel]
    keyed: bool = True  # False: acts with no key, and does no I/O (``/healthz``)


@dataclass(frozen=True)
class Admitted:
    """A key this carrier admitted earlier in one request, and the access it got: handed
    back with a later call of the same request (:meth:`InProcess.call`), that call's key is
    not looked up again. Kept no longer than the request (``client.VaultClient.admitted``)."""

    key: str
    access: Access


def _with_body(model: type[B], method: Callable[[VaultAPI, Access, B], R]) -> Operation:
    def run(front: VaultAPI, access: Access | None, body: BaseModel | None) -> BaseModel:
        if access is None or not isinstance(body, model):
            raise TypeError(f"{method.__name__} takes a key and a {model.__name__}")
        return method(front, access, body)

    return Operation(run)


def _keyed(method: Callable[[VaultAPI, Access], R]) -> Operation:
    def run(front: VaultAPI, access: Access | None, body: BaseModel | None) -> BaseModel:
        if access is None or body is not None:
            raise TypeError(f"{method.__name__} takes a key and no body")
        return method(front, access)

    return Operation(run)


def _health(front: VaultAPI, access: Access | None, body: BaseModel | None) -> BaseModel:
    return front.health()


# Every route without a path parameter but the streamed export, by the method and path the
# client calls (tests/vault/test_inprocess.py holds it to the router's routes).
OPERATIONS: dict[tuple[str, str], Operation] = {
    ("GET", "/healthz"): Operation(_health, keyed=False),
    ("POST", "/v1/keys"): _with_body(schemas.KeyCreateRequest, VaultAPI.create_key),
    ("GET", "/v1/keys"): _keyed(VaultAPI.list_keys),
    ("GET", "/v1/keys/current"): _keyed(VaultAPI.key_info),
    ("POST", "/v1/memory/ingest"): _with_body(schemas.IngestRequest, VaultAPI.ingest),
    ("POST", "/v1/memory/search"): _with_body(schemas.SearchRequest, VaultAPI.search),
    ("POST", "/v1/memory/prepare"): _with_body(schemas.PrepareRequest, VaultAPI.prepare),
    ("POST", "/v1/memory/date-search"): _with_body(schemas.DateSearchRequest, VaultAPI.date_search),
    ("POST", "/v1/memory/consolidate/checkout"): _with_body(
        schemas.CheckoutRequest, VaultAPI.checkout
    ),
    ("POST", "/v1/memory/consolidate/commit"): _with_body(schemas.CommitRequest, VaultAPI.commit),
    ("POST", "/v1/memory/import-reflections"): _with_body(
        schemas.ImportReflectionsRequest, VaultAPI.import_reflections
    ),
    ("POST", "/v1/memory/import-consolidated"): _with_body(
        schemas.MarkConsolidatedRequest, VaultAPI.import_consolidated
    ),
    ("POST", "/v1/memory/inspect"): _with_body(schemas.InspectRequest, VaultAPI.inspect),
    ("POST", "/v1/memory/delete-ids"): _with_body(schemas.DeleteIdsRequest, VaultAPI.delete_ids),
    ("DELETE", "/v1/memory"): _keyed(VaultAPI.wipe),
    ("POST", "/v1/memory/consolidate/run"): _with_body(
        schemas.ConsolidateRunRequest, VaultAPI.consolidate_run
    ),
    ("GET", "/v1/memory/consolidate/server"): _keyed(VaultAPI.server_reflector),
    ("POST", "/v1/memory/consolidate/server"): _with_body(
        schemas.ServerReflectorRequest, VaultAPI.set_server_reflector
    ),
    ("GET", "/v1/memory/stats"): _keyed(VaultAPI.stats),
    ("GET", "/v1/memory/timeline"): _keyed(VaultAPI.timeline),
    ("GET", "/v1/usage"): _keyed(VaultAPI.usage),
}
KEY_INFO = ("GET", "/v1/keys/current")


class InProcess:
    """Calls the vault's front directly (see the module's docstring)."""

    def __init__(self, front: VaultAPI) -> None:
        self._front = front

    def offers(self, method: str, path: str) -> bool:
        """Whether the call is carried here (a query string is FastAPI's to parse: those
        calls go over HTTP)."""
        return (method, path) in OPERATIONS

    async def call(
        self,
        method: str,
        path: str,
        key: str | None,
        body: BaseModel | None,
        model: type[M],
        admitted: object = None,
        origin: tuple[str | None, str | None] = (None, None),
    ) -> M:
        """``admitted``: an :class:`Admitted` of this carrier's for the same key, made earlier
        in the same request (anything else is ignored, and the key is checked); ``origin``:
        the surface and client the caller names, as the HTTP headers would."""
        access = admitted.access if isinstance(admitted, Admitted) and admitted.key == key else None
        result, _ = await self._run(method, path, key, body, access, origin=origin)
        return result if isinstance(result, model) else model.model_validate(result)

    async def admit(self, key: str) -> tuple[schemas.KeyInfo, Admitted]:
        """``GET /v1/keys/current`` for ``key``, and what it was admitted with, for the later
        calls of the same request."""
        info, access = await self._run(*KEY_INFO, key, None, None)
        assert isinstance(info, schemas.KeyInfo) and access is not None
        return info, Admitted(key, access)

    def acting_for(self, access: Access) -> ActingFor:
        return ActingFor(self, access)

    async def _run(
        self,
        method: str,
        path: str,
        key: str | None,
        body: BaseModel | None,
        admitted: Access | None,
        address: str = LOOPBACK,
        origin: tuple[str | None, str | None] = (None, None),
    ) -> tuple[BaseModel, Access | None]:
        operation = OPERATIONS[(method, path)]
        front = self._front
        size = None if body is None else len(_encoded(body))
        call = Call(path, key, address, size, operation.keyed, None, *origin)

        def run() -> tuple[BaseModel, Access | None]:
            access = front.admit(call, admitted)
            return operation.run(front, access, body), access

        try:
            if front.blocks(call):
                return await anyio.to_thread.run_sync(run)
            return run()
        except MemoryRouterError:
            raise
        except Exception as exc:
            raise unexpected(exc, method, path) from exc


def _encoded(body: BaseModel) -> bytes:
    """The body's bytes as the HTTP client sends them (``schemas.wire``, then httpx's own
    JSON encoding)."""
    return json.dumps(schemas.wire(body), ensure_ascii=False, separators=(",", ":")).encode()


class ActingFor:
    """The vault called in process with an access admitted earlier, and no key: how the
    server's own reflector works on the vault of the write that woke it, or of the request
    that asked for a run (``reflector/``). Its calls take the same admission (its rate-limit
    bucket is its own: ``reflector:`` and the key's public id) and the same operations as
    any caller's; the key itself is never kept. It also holds and releases the vault for
    one run (:meth:`claim`, :meth:`finish`), which no route offers."""

    def __init__(self, carrier: InProcess, access: Access) -> None:
        self._carrier = carrier
        self._access = access

    @property
    def vault_id(self) -> str:
        return self._access.vault_id

    def offers(self, method: str, path: str) -> bool:
        return (method, path) in OPERATIONS

    async def call(
        self,
        method: str,
        path: str,
        key: str | None,
        body: BaseModel | None,
        model: type[M],
        admitted: object = None,
        origin: tuple[str | None, str | None] = (None, None),
    ) -> M:
        """What it writes is the reflector's (``stored_by.surface``), whatever ``origin``
        the client names."""
        address = f"reflector:{self._access.key_id}"
        result, _ = await self._carrier._run(
            method, path, None, body, self._access, address, origin=("reflector", None)
        )
        return result if isinstance(result, model) else model.model_validate(result)

    async def admit(self, key: str) -> tuple[schemas.KeyInfo, object]:
        raise TypeError("ActingFor acts with an access admitted already")

    def claim(self, holder: str, hold_ms: int, *, triggered: bool) -> int | None:
        """Hold the vault for one run of ``hold_ms``: the failed runs in a row before it, or
        None when it may not run now (blocking: the store is asked)."""
        front = self._carrier._front
        runs = front.claim_reflector(self._access, holder, hold_ms, triggered=triggered)
        return None if runs is None else runs.failures

    def finish(
        self,
        holder: str,
        outcome: str,
        error: str | None,
        done: tuple[int, int],
        calls: Sequence[tuple[int, int]],
        wait_ms: int,
    ) -> None:
        """Release the hold, keeping what the run did: its stop reason, its error, the
        batches and reflections ``done`` and the provider calls' tokens (blocking)."""
        ended = RunOutcome(outcome, error, done[0], done[1], tuple(calls))
        self._carrier._front.finish_reflector(self._access, holder, ended, wait_ms)
