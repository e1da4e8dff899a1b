"""A typed async client for the MemoryRouter REST API.

One method per endpoint, wire models from :mod:`schemas`. The transport is injectable: the
embedded server passes an in-process ASGI transport over the vault app, a remote deployment
uses the network. Non-2xx answers raise the error of :mod:`errors` their envelope names.

A 429 is retried, up to :data:`MAX_RETRIES` times, after the ``Retry-After`` it names (at
most :data:`MAX_RETRY_AFTER` seconds each; the sleep is injectable), so long jobs (export,
import, the consolidation loop) ride out a rate limit instead of failing half-way. A client
made with a smaller ``longest_wait`` (the MCP server's: a host is waiting on the tool call)
rides out short waits only and raises :class:`RateLimited` at once when asked to wait longer,
so the model hears how long to wait instead of the host timing out.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar
from urllib.parse import quote, urlencode

import anyio
import httpx2
from pydantic import BaseModel

from mcp_memoryrouter import schemas
from mcp_memoryrouter.errors import MemoryRouterError, RateLimited, TransportFailure, error_for

M = TypeVar("M", bound=BaseModel)
Sleep = Callable[[float], Awaitable[None]]
MAX_RETRIES = 5
MAX_RETRY_AFTER = 30.0  # seconds: a longer wait is capped, not trusted


class Carrier(Protocol):
    """Carries a call to a vault in this process without HTTP (the embedded server's
    ``vault.http.inprocess.InProcess``): the same operation, admission and errors, no
    encoding."""

    def offers(self, method: str, path: str) -> bool: ...

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
        """``admitted``: what :meth:`admit` answered for this key earlier in the request;
        ``origin``: the surface and client the caller names (the headers over HTTP)."""
        ...

    async def admit(self, key: str) -> tuple[schemas.KeyInfo, object]:
        """``GET /v1/keys/current`` for ``key``, and a token of the admission just made."""
        ...


class VaultClient:
    """Calls the vault with one memory key; :meth:`with_key` shares the connection pool."""

    def __init__(
        self,
        base_url: str,
        key: str | None = None,
        *,
        transport: httpx2.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
        http: httpx2.AsyncClient | None = None,
        sleep: Sleep = anyio.sleep,
        longest_wait: float = MAX_RETRY_AFTER,
        carrier: Carrier | None = None,
        surface: schemas.Surface | None = None,
        client_name: str | None = None,
    ) -> None:
        """``surface``, ``client_name``: what this client tells the vault stored what it
        writes (``stored_by``; sent as :data:`schemas.SURFACE_HEADER` and
        :data:`schemas.CLIENT_HEADER`; None: the vault's default, ``rest``)."""
        self.base_url = base_url.rstrip("/")
        self._key = key
        self._carrier = carrier
        self._origin: tuple[str | None, str | None] = (surface, client_name)
        self._admitted: object = None  # the carrier's admission of this key (admitted())
        self._sleep = sleep
        self._longest_wait = longest_wait
        self._http = http or httpx2.AsyncClient(
            base_url=self.base_url, transport=transport, timeout=timeout
        )

    def with_key(self, key: str) -> VaultClient:
        return self._copy(key, *self._origin)

    def as_surface(self, surface: schemas.Surface, client_name: str | None = None) -> VaultClient:
        """This client (its key, its pool, an admission it holds) telling the vault that
        ``surface`` and ``client_name`` store what it writes."""
        copy = self._copy(self._key, surface, client_name)
        copy._admitted = self._admitted
        return copy

    def _copy(self, key: str | None, surface: str | None, client_name: str | None) -> VaultClient:
        copy = VaultClient(
            self.base_url,
            key,
            http=self._http,
            sleep=self._sleep,
            longest_wait=self._longest_wait,
            carrier=self._carrier,
        )
        copy._origin = (surface, client_name)
        return copy

    async def admitted(self) -> tuple[schemas.KeyInfo, VaultClient]:
        """What the vault says of this client's key now (:meth:`key_info`), and a client
        that acts with the admission just made: in process, its calls do not look the key
        up again (the rate limit and the body limit apply to each as ever); over HTTP, each
        call presents the key as any other does.

        Keep that client for the one request that asked, no longer: a key revoked later is
        refused only by a new admission."""
        carrier = self._carrier
        if carrier is None or self._key is None or not carrier.offers("GET", "/v1/keys/current"):
            return await self.key_info(), self
        info, admission = await carrier.admit(self._key)
        keyed = self.with_key(self._key)
        keyed._admitted = admission
        return info, keyed

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- endpoints -------------------------------------------------------------------

    async def ingest(self, body: schemas.IngestRequest) -> schemas.IngestResponse:
        return await self._call("POST", "/v1/memory/ingest", body, schemas.IngestResponse)

    async def search(self, body: schemas.SearchRequest) -> schemas.SearchResponse:
        return await self._call("POST", "/v1/memory/search", body, schemas.SearchResponse)

    async def prepare(self, body: schemas.PrepareRequest) -> schemas.PrepareResponse:
        return await self._call("POST", "/v1/memory/prepare", body, schemas.PrepareResponse)

    async def date_search(self, body: schemas.DateSearchRequest) -> schemas.DateSearchResponse:
        return await self._call("POST", "/v1/memory/date-search", body, schemas.DateSearchResponse)

    async def checkout(self, body: schemas.CheckoutRequest) -> schemas.CheckoutResponse:
        return await self._call(
            "POST", "/v1/memory/consolidate/checkout", body, schemas.CheckoutResponse
        )

    async def commit(self, body: schemas.CommitRequest) -> schemas.CommitResponse:
        return await self._call(
            "POST", "/v1/memory/consolidate/commit", body, schemas.CommitResponse
        )

    async def consolidate_run(
        self, body: schemas.ConsolidateRunRequest
    ) -> schemas.ConsolidateRunResponse:
        return await self._call(
            "POST", "/v1/memory/consolidate/run", body, schemas.ConsolidateRunResponse
        )

    async def server_reflector(self) -> schemas.ServerReflector:
        return await self._call(
            "GET", "/v1/memory/consolidate/server", None, schemas.ServerReflector
        )

    async def set_server_reflector(
        self, body: schemas.ServerReflectorRequest
    ) -> schemas.ServerReflector:
        return await self._call(
            "POST", "/v1/memory/consolidate/server", body, schemas.ServerReflector
        )

    async def import_reflections(
        self, body: schemas.ImportReflectionsRequest
    ) -> schemas.ImportReflectionsResponse:
        return await self._call(
            "POST", "/v1/memory/import-reflections", body, schemas.ImportReflectionsResponse
        )

    async def import_consolidated(
        self, body: schemas.MarkConsolidatedRequest
    ) -> schemas.MarkConsolidatedResponse:
        return await self._call(
            "POST", "/v1/memory/import-consolidated", body, schemas.MarkConsolidatedResponse
        )

    async def inspect(self, body: schemas.InspectRequest) -> schemas.InspectResponse:
        return await self._call("POST", "/v1/memory/inspect", body, schemas.InspectResponse)

    async def delete_ids(self, body: schemas.DeleteIdsRequest) -> schemas.DeleteIdsResponse:
        return await self._call("POST", "/v1/memory/delete-ids", body, schemas.DeleteIdsResponse)

    async def wipe(self) -> schemas.WipeResponse:
        return await self._call("DELETE", "/v1/memory", None, schemas.WipeResponse)

    async def stats(self) -> schemas.StatsResponse:
        return await self._call("GET", "/v1/memory/stats", None, schemas.StatsResponse)

    async def usage(self) -> schemas.UsageResponse:
        return await self._call("GET", "/v1/usage", None, schemas.UsageResponse)

    async def timeline(self, bucket: str = "month") -> schemas.TimelineResponse:
        """``GET /v1/memory/timeline``: memories per ``bucket`` (day, week or month) and tier.
        Its query string takes it over HTTP even beside an in-process carrier."""
        query = urlencode({"bucket": bucket})
        return await self._call(
            "GET", f"/v1/memory/timeline?{query}", None, schemas.TimelineResponse
        )

    async def key_info(self) -> schemas.KeyInfo:
        return await self._call("GET", "/v1/keys/current", None, schemas.KeyInfo)

    async def mint_key(self, body: schemas.KeyCreateRequest) -> schemas.KeyCreated:
        return await self._call("POST", "/v1/keys", body, schemas.KeyCreated)

    async def list_keys(self) -> schemas.KeyList:
        return await self._call("GET", "/v1/keys", None, schemas.KeyList)

    async def revoke_key(self, key_id: str) -> schemas.KeyRevoked:
        """``DELETE /v1/keys/{id}`` (the id quoted whole: it is one path segment)."""
        path = f"/v1/keys/{quote(key_id, safe='')}"
        return await self._call("DELETE", path, None, schemas.KeyRevoked)

    async def health(self) -> schemas.Health:
        return await self._call("GET", "/healthz", None, schemas.Health)

    async def export_lines(self) -> AsyncIterator[dict[str, Any]]:
        """``GET /v1/memory/export``: the vault's NDJSON dump, one parsed line at a time.

        A record ends at "\\n" only: ``aiter_lines`` splits as ``str.splitlines`` does, also
        at U+2028, U+2029 and U+0085, which the vault's JSON leaves unescaped inside a
        string."""
        async with self._send("GET", "/v1/memory/export", None, stream=True) as response:
            try:
                async for number, line in ndjson_records(response.aiter_bytes()):
                    yield self._record(number, line)
            except httpx2.HTTPError as exc:
                raise self._unreachable(exc) from exc

    def _record(self, number: int, line: bytes) -> dict[str, Any]:
        try:
            parsed = json.loads(line)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError alike
            raise TransportFailure(
                f"the export from {self.base_url} broke off: its line {number} is not a JSON "
                f"record ({type(exc).__name__}); run the export again"
            ) from exc
        if not isinstance(parsed, dict):
            raise TransportFailure(
                f"the export from {self.base_url} broke off: its line {number} is not a JSON "
                "object; run the export again"
            )
        return parsed

    # --- plumbing ----------------------------------------------------------------------

    async def _call(self, method: str, path: str, body: BaseModel | None, model: type[M]) -> M:
        carrier = self._carrier
        if carrier is None or not carrier.offers(method, path):
            async with self._send(method, path, body) as response:
                return model.model_validate(response.json())
        for attempt in range(MAX_RETRIES + 1):
            try:
                return await carrier.call(
                    method, path, self._key, body, model, self._admitted, self._origin
                )
            except RateLimited as limited:
                wait = _capped(limited.details.get("retry_after"))
                if not self._retries(attempt, wait):
                    raise
                await self._sleep(wait)
        raise AssertionError("unreachable")

    def _retries(self, attempt: int, wait: float) -> bool:
        """Whether a 429 asking for ``wait`` seconds is waited out (the one rule for both
        ways a call travels)."""
        return attempt < MAX_RETRIES and wait <= self._longest_wait

    @asynccontextmanager
    async def _send(
        self, method: str, path: str, body: BaseModel | None, *, stream: bool = False
    ) -> AsyncIterator[httpx2.Response]:
        """The 2xx response, after retrying 429s; any other error status raises."""
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        surface, client_name = self._origin
        if surface is not None:
            headers[schemas.SURFACE_HEADER] = surface
        if client_name is not None:  # percent-encoded UTF-8: a header value is ASCII
            headers[schemas.CLIENT_HEADER] = quote(client_name, safe=" !#$&'()*+,/:;=?@[]~")
        payload: Any = None
        if body is not None:
            payload = schemas.wire(body)
        request = self._http.build_request(method, path, json=payload, headers=headers)
        for attempt in range(MAX_RETRIES + 1):
            try:
                response = await self._http.send(request, stream=stream)
            except httpx2.HTTPError as exc:
                raise self._unreachable(exc) from exc
            try:
                if response.status_code == 429 and self._retries(
                    attempt, wait := retry_after(response)
                ):
                    await self._sleep(wait)
                    continue
                if response.status_code >= 400:
                    await response.aread()
                    raise _error_of(response)
                yield response
                return
            finally:
                await response.aclose()
        raise AssertionError("unreachable")

    def _unreachable(self, exc: httpx2.HTTPError) -> TransportFailure:
        return TransportFailure(
            f"cannot reach the vault at {self.base_url}: {type(exc).__name__}: {exc}"
        )


def retry_after(response: httpx2.Response) -> float:
    """The seconds a 429 asks to wait (RFC 9110 §10.2.3, delay-seconds form), capped at
    :data:`MAX_RETRY_AFTER`; 1 s when absent or unreadable."""
    return _capped(response.headers.get("retry-after"))


def _capped(value: object) -> float:
    try:
        seconds = float(value if isinstance(value, (int, float, str)) else "1")
    except ValueError:
        seconds = 1.0
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def _error_of(response: httpx2.Response) -> MemoryRouterError:
    try:
        error = response.json()["error"]
        return error_for(str(error["code"]), str(error["message"]), dict(error.get("details", {})))
    except (ValueError, KeyError, TypeError):
        return MemoryRouterError(f"the vault answered HTTP {response.status_code}")


async def ndjson_records(chunks: AsyncIterator[bytes]) -> AsyncIterator[tuple[int, bytes]]:
    """The records of an NDJSON body, numbered from 1: split at b"\\n" alone (a multi-byte
    UTF-8 character never holds that byte), blank lines skipped, a last line without its
    newline kept."""
    pending: list[bytes] = []
    number = 0
    async for chunk in chunks:
        head, *rest = chunk.split(b"\n")
        pending.append(head)
        if not rest:
            continue
        *complete, tail = [b"".join(pending), *rest]
        pending = [tail]
        for line in complete:
            number += 1
            if line.strip():
                yield number, line
    last = b"".join(pending)
    if last.strip():
        yield number + 1, last
