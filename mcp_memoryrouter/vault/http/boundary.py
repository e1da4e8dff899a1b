"""The HTTP boundary: one error envelope for everything, and the request-size limit."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_memoryrouter import limits
from mcp_memoryrouter.asgi import error_response, read_body, replay, send_json
from mcp_memoryrouter.errors import InvalidRequest, MemoryRouterError, too_large

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


# Where an admitted request's access is kept for the route (``api.get_access``), so a key
# checked before its body was read is not checked twice.
ACCESS_STATE = "memoryrouter.access"


class BodyLimit:
    """Admit a request before its body is read, then read the body under a size limit and
    a deadline.

    A request that carries a body (``Content-Length`` above 0, or chunked) under ``/v1/``
    must first present a key ``admit`` accepts: a caller without one is refused with no
    byte of its body buffered. The body is then read whole, within ``max_bytes`` (413, also
    for a declared length above it) and ``seconds`` (408), and handed to the route."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        admit: Callable[[Scope], Awaitable[object]] | None = None,
        seconds: float = limits.BODY_SECONDS,
        serves: Callable[[Scope], bool] | None = None,
    ) -> None:
        """``serves``: whether a route answers the request's method and path (only those
        requests are admitted first; the rest go on unread, for the router's 404 or 405)."""
        self.app = app
        self.max_bytes = max_bytes
        self.admit = admit
        self.seconds = seconds
        self.serves = serves

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send, too_large(self.max_bytes))
            return
        try:
            if self._admits(scope, headers):
                assert self.admit is not None
                scope.setdefault("state", {})[ACCESS_STATE] = await self.admit(scope)
            body = await read_body(receive, self.max_bytes, self.seconds)
        except MemoryRouterError as refused:
            await self._refuse(send, refused)
            return
        if body is None:
            await self._refuse(send, too_large(self.max_bytes))
            return
        await self.app(scope, replay(body, receive), send)

    def _admits(self, scope: Scope, headers: dict[bytes, bytes]) -> bool:
        if self.admit is None or not _has_body(headers) or not scope["path"].startswith("/v1/"):
            return False
        return self.serves is None or self.serves(scope)

    async def _refuse(self, send: Send, error: MemoryRouterError) -> None:
        headers = [(b"www-authenticate", b"Bearer")] if error.status == 401 else []
        # the unread rest of the body is never read: the connection closes after this
        await send_json(send, error.status, error.envelope(), [*headers, (b"connection", b"close")])


def _has_body(headers: dict[bytes, bytes]) -> bool:
    declared = headers.get(b"content-length")
    return b"transfer-encoding" in headers or (declared is not None and declared != b"0")
