"""The HTTP boundary: one error envelope for everything, and admission before the body."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.edge.body import read_body, replay
from mcp_memoryrouter.edge.responses import error_response
from mcp_memoryrouter.errors import InvalidRequest, MemoryRouterError, too_large
from mcp_memoryrouter.vault.http.front import Call, VaultAPI
from mcp_memoryrouter.vault.http.presented import presented_key

log = logging.getLogger("mcp_memoryrouter.vault")

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 400: "invalid_request"}


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p != "body"]
    return ".".join(parts) or "body"


def _validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"field": _field(tuple(e.get("loc", ()))), "message": str(e.get("msg", "invalid"))}
        for e in exc.errors()
    ]
    first = errors[0] if errors else {"field": "body", "message": "invalid request"}
    message = f"{first['field']}: {first['message']}".replace("Value error, ", "")
    return error_response(InvalidRequest(message, {"errors": errors}))


def _known(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MemoryRouterError)
    return error_response(exc)


def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    body = {"error": {"code": code, "message": str(exc.detail), "details": {}}}
    headers = exc.headers
    if exc.status_code == 405:
        headers = {**(headers or {}), "Allow": _allowed(request)}
    return JSONResponse(body, status_code=exc.status_code, headers=headers)


def _allowed(request: Request) -> str:
    """Every method some route serves at this path (the router names only the first
    route's: ``/v1/keys`` is both ``GET`` and ``POST``)."""
    methods: set[str] = set()
    routes = list(request.app.router.routes)
    while routes:
        route = routes.pop()
        # an included router (no prefix here) stands for the routes it holds
        included = getattr(route, "original_router", None)
        if included is not None:
            routes.extend(included.routes)
        elif route.matches(request.scope)[0] is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return ", ".join(sorted(methods))


def unexpected(exc: BaseException, method: str, path: str) -> MemoryRouterError:
    """What a caller hears of a failure no rule names (500, ``internal error``), logged by
    its type only: its text may hold a caller's data."""
    log.error("unhandled %s on %s %s", type(exc).__name__, method, path)
    return MemoryRouterError("internal error")


def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    error = unexpected(exc, request.method, request.url.path)
    return JSONResponse(error.envelope(), status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(MemoryRouterError, _known)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)
    app.openapi = _without_422(app)  # type: ignore[method-assign]


def _without_422(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """The OpenAPI document without FastAPI's 422 answers: validation failures are 400 in
    the envelope here, which every route declares."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = generate()
            for item in document.get("paths", {}).values():
                for operation in item.values():
                    operation.get("responses", {}).pop("422", None)
            schemas = document.get("components", {}).get("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                schemas.pop(name, None)
            app.openapi_schema = document
        return app.openapi_schema

    return openapi


# Where an admitted request's access is kept for its route (``api.get_access``).
ACCESS_STATE = "memoryrouter.access"


class Admission:
    """The REST side of the vault's one admission step: admit a request before its body is
    read (``VaultAPI.admit``: the rate limit, the size it declares, its key), then read the
    body whole within the size limit (413) and ``seconds`` (408), and hand it to the route
    with what it was admitted with.

    A request under ``/v1/`` that a route serves acts with a key: a caller without one the
    vault accepts is refused with no byte of its body buffered. Any other request (``/healthz``,
    the OpenAPI document, a path no route serves: the router's 404 or 405) is admitted without
    one."""

    def __init__(
        self,
        app: ASGIApp,
        front: VaultAPI,
        serves: Callable[[Scope], bool],
        seconds: float = limits.BODY_SECONDS,
    ) -> None:
        """``serves``: whether a route answers the request's method and path."""
        self.app = app
        self.front = front
        self.serves = serves
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        front = self.front
        call = self._call(scope)
        try:
            if front.blocks(call):
                access = await anyio.to_thread.run_sync(front.admit, call)
            else:
                access = front.admit(call)
            body = await read_body(receive, front.max_body_bytes, self.seconds)
            if body is None:
                raise too_large(front.max_body_bytes)
        except MemoryRouterError as refused:
            response = error_response(refused)
            if _has_body(scope):  # its unread rest is never read: the connection closes
                response.headers["connection"] = "close"
            await response(scope, receive, send)
            return
        if access is not None:
            scope.setdefault("state", {})[ACCESS_STATE] = access
        await self.app(scope, replay(body, receive), send)

    def _call(self, scope: Scope) -> Call:
        """The request as admission reads it: its key (by the one rule, ``presented_key``),
        its address, the length it declares, and whether it acts with a key."""
        try:
            key, unreadable = presented_key(scope.get("headers", [])), None
        except InvalidRequest as refused:
            key, unreadable = None, refused
        client = scope.get("client")
        headers = dict(scope.get("headers", []))
        declared = headers.get(b"content-length")
        size = int(declared) if declared is not None and declared.isdigit() else None
        keyed = scope["path"].startswith("/v1/") and self.serves(scope)
        address = str(client[0]) if client else None
        surface, named = (headers.get(h) for h in (_SURFACE, _CLIENT))
        return Call(
            scope["path"],
            key,
            address,
            size,
            keyed,
            unreadable,
            None if surface is None else surface.decode("latin-1"),
            # percent-encoded UTF-8, as the client sends a name (header values are ASCII)
            None if named is None else unquote(named.decode("latin-1"), errors="replace"),
        )


_SURFACE = schemas.SURFACE_HEADER.lower().encode()
_CLIENT = schemas.CLIENT_HEADER.lower().encode()


def _has_body(scope: Scope) -> bool:
    headers = dict(scope.get("headers", []))
    declared = headers.get(b"content-length")
    return b"transfer-encoding" in headers or (declared is not None and declared != b"0")
