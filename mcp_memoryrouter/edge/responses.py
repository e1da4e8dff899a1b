"""Whole answers from middleware, before or instead of an app: JSON, bytes, and the error
envelope with the headers its status owes the caller."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_memoryrouter.errors import MemoryRouterError, RateLimited, StoreUnavailable


async def send_json(
    send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    payload = json.dumps(body).encode()
    json_type = (b"content-type", b"application/json")
    await send_bytes(send, status, payload, [json_type, *(headers or [])])


async def send_bytes(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    """A whole response from an ASGI middleware: ``headers`` plus the body's length."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def error_response(error: MemoryRouterError) -> JSONResponse:
    """The error envelope with its status (and the header a 401, a 429 or a 503 owes its
    caller: a 503 names when to try again where its details say, RFC 9110 §10.2.3)."""
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else {}
    if isinstance(error, RateLimited):
        headers["Retry-After"] = str(error.details.get("retry_after", 1))
    elif error.status == 503 and "retry_after" in error.details:
        headers["Retry-After"] = str(error.details["retry_after"])
    return JSONResponse(error.envelope(), status_code=error.status, headers=headers)


async def unless_unavailable(
    app: ASGIApp,
    scope: Scope,
    receive: Receive,
    send: Send,
    refuse: Callable[[int], Awaitable[None]],
) -> None:
    """``app``; when the database cannot answer (a restart, a failover) before a response has
    begun, ``refuse(seconds)`` answers instead: a 503 in the caller's shape, which names
    those seconds in ``Retry-After``."""
    started = False

    async def sending(message: Message) -> None:
        nonlocal started
        started = started or message["type"] == "http.response.start"
        await send(message)

    try:
        await app(scope, receive, sending)
    except StoreUnavailable as exc:
        if started:
            raise
        await refuse(int(exc.details.get("retry_after", 1)))
