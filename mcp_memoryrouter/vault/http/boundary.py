"""The HTTP boundary: one error envelope for everything, and the request-size limit."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

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


class BodyLimit:
    """Refuse request bodies above ``max_bytes`` with 413, before the route reads them."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        body = await read_body(receive, self.max_bytes)
        if body is None:
            await self._refuse(send)
            return
        await self.app(scope, replay(body, receive), send)

    async def _refuse(self, send: Send) -> None:
        await send_json(send, 413, too_large(self.max_bytes).envelope())
