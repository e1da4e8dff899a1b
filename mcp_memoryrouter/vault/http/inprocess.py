"""The vault app called in process, without HTTP: what the embedded server's MCP tools use.

A tool's :class:`~mcp_memoryrouter.client.VaultClient` hands its wire model to
:class:`InProcess`, which runs the very route function the REST API runs for that method
and path, with the same rules before it: the rate limit (the app's own buckets, the same
caller identity), the request-size limit (measured on the body as the HTTP client encodes
it), authentication by the presented key, and the same error for anything unexpected. What
it skips is the cost of the hop: encoding to bytes and back, the ASGI and FastAPI layers,
and a worker thread per dependency (an in-process HTTP call cost ~2.5 ms of CPU; see
docs/benchmarks.md, "The cost of a call"). A call it cannot make this way (a route that reads
the raw request or streams, a path parameter, a query string) is not offered, and the client
sends that call over HTTP.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio.to_thread
from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel

from mcp_memoryrouter import schemas
from mcp_memoryrouter.errors import MemoryRouterError, too_large
from mcp_memoryrouter.vault.http.boundary import unexpected
from mcp_memoryrouter.vault.http.ratelimit import UNLIMITED_PATHS, Budgets, caller, throttled

M = TypeVar("M", bound=BaseModel)
LOOPBACK = "127.0.0.1"  # the address an in-process HTTP call presents without a key


@dataclass(frozen=True)
class _Route:
    endpoint: Callable[..., Any]
    is_async: bool
    takes: frozenset[str]  # which of _GIVEN it takes


class InProcess:
    """Calls the vault app's route functions directly (see the module's docstring)."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._routes: dict[tuple[str, str], _Route] = {}
        routes = list(app.routes)
        while routes:
            route = routes.pop()
            included = getattr(route, "original_router", None)  # a router included whole
            if included is not None:
                routes.extend(included.routes)
            elif isinstance(route, APIRoute) and not route.param_convertors:
                callable_ = _route(route.endpoint)
                if callable_ is not None:
                    for method in route.methods or ():
                        self._routes[(method, route.path)] = callable_

    def offers(self, method: str, path: str) -> bool:
        """Whether the call is carried here: a route without path parameters, called
        without a query string (it passes only what the client sends in a body; a query
        string and a path parameter are FastAPI's to parse, so those calls go over HTTP)."""
        return "?" not in path and (method, path) in self._routes

    def _spender(self, path: str, key: str | None) -> Callable[[], None] | None:
        """Take the call's rate-limit token: at once from budgets in memory (raising the 429
        when the bucket is empty; None returned), or, from budgets in the store, a step for
        the worker thread the call runs in anyway."""
        buckets: Budgets | None = self._app.state.rate_buckets
        if buckets is None or path in UNLIMITED_PATHS:
            return None
        who = caller(key, LOOPBACK)

        def spend() -> None:
            refused = throttled(buckets, who, buckets.take(who))
            if refused is not None:
                raise refused

        if buckets.blocking:
            return spend
        spend()
        return None

    async def call(
        self, method: str, path: str, key: str | None, body: BaseModel | None, model: type[M]
    ) -> M:
        route = self._routes[(method, path)]
        state = self._app.state
        spend = self._spender(path, key)  # an empty in-memory bucket raises here
        if body is not None and len(_encoded(body)) > state.max_body_bytes:
            raise too_large(state.max_body_bytes)
        service = state.service
        offered = {"service": service, "store_kind": state.store_kind, "body": body}
        given = {name: value for name, value in offered.items() if name in route.takes}
        wants_access = "access" in route.takes

        def admit() -> None:
            if spend is not None:
                spend()
            if wants_access:
                given["access"] = service.authenticate(key)

        def run() -> Any:
            admit()
            return route.endpoint(**given)

        try:
            if route.is_async:
                if wants_access or spend is not None:
                    await anyio.to_thread.run_sync(admit)
                result = await route.endpoint(**given)
            else:
                result = await anyio.to_thread.run_sync(run)
        except MemoryRouterError:
            raise
        except Exception as exc:
            raise unexpected(exc, method, path) from exc
        return result if isinstance(result, model) else model.model_validate(result)


def _encoded(body: BaseModel) -> bytes:
    """The body's bytes as the HTTP client sends them (``schemas.wire``, then httpx's own
    JSON encoding)."""
    return json.dumps(schemas.wire(body), ensure_ascii=False, separators=(",", ":")).encode()


_GIVEN = frozenset({"service", "store_kind", "access", "body"})


def _route(endpoint: Callable[..., Any]) -> _Route | None:
    """How to call ``endpoint``, when every parameter it has is one this module gives or
    has a default (headers and query parameters the client never sends)."""
    parameters = inspect.signature(endpoint).parameters
    for name, parameter in parameters.items():
        if name not in _GIVEN and parameter.default is inspect.Parameter.empty:
            return None
    return _Route(endpoint, inspect.iscoroutinefunction(endpoint), _GIVEN & frozenset(parameters))
