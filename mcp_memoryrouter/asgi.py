"""Small ASGI pieces the HTTP boundaries share: buffering a request body under a limit,
handing it on again, answering with a JSON body or an error envelope, and spotting a
repeated credential header."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

import anyio
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Send

from mcp_memoryrouter.errors import MemoryRouterError, RateLimited, RequestTimeout


async def read_body(receive: Receive, limit: int, seconds: float | None = None) -> bytes | None:
    """The whole request body, or None as soon as it passes ``limit`` bytes. With
    ``seconds``, a body not whole by then raises :class:`RequestTimeout` (a client that
    declares a body and stalls holds no buffer for longer)."""
    if seconds is None:
        return await _read_body(receive, limit)
    try:
        with anyio.fail_after(seconds):
            return await _read_body(receive, limit)
    except TimeoutError:
        raise RequestTimeout(
            f"the request body did not arrive within {seconds:g} s: send it whole, at once",
            {"seconds": seconds},
        ) from None


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the buffered body to the app, then defers to the real one."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


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


def repeated_header(headers: Iterable[tuple[bytes, bytes]], names: Iterable[str]) -> str | None:
    """The first of ``names`` (lower case) that came more than once, or as a comma-joined
    list: a credential header must carry one value, or whoever reads the first and whoever
    reads the last would each see a different caller."""
    wanted = set(names)
    seen: set[str] = set()
    for raw, value in headers:
        name = raw.decode("latin-1").lower()
        if name not in wanted:
            continue
        if name in seen or b"," in value:
            return name
        seen.add(name)
    return None


def error_response(error: MemoryRouterError) -> JSONResponse:
    """The error envelope with its status (and the header a 401 or a 429 owes its caller)."""
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else {}
    if isinstance(error, RateLimited):
        headers["Retry-After"] = str(error.details.get("retry_after", 1))
    return JSONResponse(error.envelope(), status_code=error.status, headers=headers)


def host_allowed(host: str, patterns: Sequence[str]) -> bool:
    """``host`` (a Host header: a name and an optional port) matches one of ``patterns``: an
    exact ``name`` or ``name:port``, or ``name:*`` for that name with any port."""
    host = host.lower()
    name = _name(host)
    for pattern in (p.lower() for p in patterns):
        if pattern.endswith(":*") and name == pattern[:-2] and host != name:
            return True
        if host == pattern:
            return True
    return False


def _name(host: str) -> str:
    """The host without its port: ``[::1]:8787`` is ``[::1]``, ``a.example:443`` is
    ``a.example``."""
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def foreign_origin(origin: str | None, *own: str) -> bool:
    """A request's ``Origin`` header names a site other than ``own`` (the ``Host`` it was
    sent to, and any other name this server has). An absent Origin is not foreign: browsers
    omit it on some navigations, and the forms' tokens and cookies still stand; ``null`` (a
    sandboxed frame, or a page sent with ``Referrer-Policy: no-referrer``) is."""
    if not origin:
        return False
    netloc = urlsplit(origin).netloc.lower()
    return all(netloc != name.lower() for name in own)
