"""A typed async client for the MemoryRouter REST API.

One method per endpoint, wire models from :mod:`schemas`. The transport is injectable: the
embedded server passes an in-process ASGI transport over the vault app, a remote deployment
uses the network. Non-2xx answers raise the error of :mod:`errors` their envelope names.
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx2
from pydantic import BaseModel

from mcp_memoryrouter import schemas
from mcp_memoryrouter.errors import MemoryRouterError, TransportFailure, error_for

M = TypeVar("M", bound=BaseModel)


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
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._key = key
        self._http = http or httpx2.AsyncClient(
            base_url=self.base_url, transport=transport, timeout=timeout
        )

    def with_key(self, key: str) -> VaultClient:
        return VaultClient(self.base_url, key, http=self._http)

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

    async def import_reflections(
        self, body: schemas.ImportReflectionsRequest
    ) -> schemas.ImportReflectionsResponse:
        return await self._call(
            "POST", "/v1/memory/import-reflections", body, schemas.ImportReflectionsResponse
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

    async def key_info(self) -> schemas.KeyInfo:
        return await self._call("GET", "/v1/keys/current", None, schemas.KeyInfo)

    async def mint_key(self, body: schemas.KeyCreateRequest) -> schemas.KeyCreated:
        return await self._call("POST", "/v1/keys", body, schemas.KeyCreated)

    async def health(self) -> schemas.Health:
        return await self._call("GET", "/healthz", None, schemas.Health)

    # --- plumbing ----------------------------------------------------------------------

    async def _call(self, method: str, path: str, body: BaseModel | None, model: type[M]) -> M:
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        payload: Any = None
        if body is not None:
            payload = body.model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            response = await self._http.request(method, path, json=payload, headers=headers)
        except httpx2.HTTPError as exc:
            raise TransportFailure(
                f"cannot reach the vault at {self.base_url}: {type(exc).__name__}: {exc}"
            ) from exc
        if response.status_code >= 400:
            raise _error_of(response)
        return model.model_validate(response.json())


def _error_of(response: httpx2.Response) -> MemoryRouterError:
    try:
        error = response.json()["error"]
        return error_for(str(error["code"]), str(error["message"]), dict(error.get("details", {})))
    except (ValueError, KeyError, TypeError):
        return MemoryRouterError(f"the vault answered HTTP {response.status_code}")
