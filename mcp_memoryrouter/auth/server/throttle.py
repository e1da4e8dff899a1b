"""Limits on the authorization server's endpoints, per client address.

A request rate shared by /authorize, /token, /revoke, /register and the sign-in and consent
pages; a stricter one for /register (each registration is stored); and a body size for every
POST, checked before the body is parsed. Past a rate, OAuth endpoints answer 429 with an
RFC 6749 error body and pages a small HTML page, both with ``Retry-After``; past the size,
413. While the database cannot answer (a restart, a failover), 503 with ``Retry-After`` in
the same shapes. The client address is the ASGI client host: ``serve`` takes it from
forwarding headers only when the connection comes from a proxy named in
``MEMORYROUTER_TRUSTED_PROXIES`` (edge.py), so a client cannot pick a new address, and a new
budget, per request.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_memoryrouter.edge.body import read_body, replay
from mcp_memoryrouter.edge.ratelimit import MonotonicMs, TokenBuckets
from mcp_memoryrouter.edge.responses import send_bytes, unless_unavailable
from mcp_memoryrouter.pages.headers import REFUSAL_HEADERS, raw

GUARDED_PATHS = frozenset({"/authorize", "/token", "/revoke", "/register"})
PAGES_PREFIX = "/oauth/"  # the sign-in and consent pages
BODY_LIMIT = 16 * 1024  # bytes of a POST: registrations and forms are far smaller
JSON_HEADERS = [
    (b"content-type", b"application/json"),
    (b"access-control-allow-origin", b"*"),
    (b"access-control-expose-headers", b"Retry-After"),
]
HTML_HEADERS = [(b"content-type", b"text/html; charset=utf-8"), *raw(REFUSAL_HEADERS)]


@dataclass(frozen=True)
class OAuthLimits:
    """Requests a minute per address (bursts of as many), and registrations a minute per
    address in bursts of ``register_burst``; 0 turns a limit off."""

    per_minute: int
    register_per_minute: int
    register_burst: int


def buckets(per_minute: int, burst: int, clock: MonotonicMs) -> TokenBuckets | None:
    return TokenBuckets(per_minute, burst, clock) if per_minute else None


async def refuse(send: Send, status: int, message: str, *, page: bool, wait: int | None) -> None:
    headers = [] if wait is None else [(b"retry-after", str(wait).encode())]
    if page:
        titles = {429: "Too many requests", 503: "Try again in a moment"}
        title = titles.get(status, "Request too large")
        html = f"<!doctype html><title>{title}</title><h1>{title}</h1><p>{message}</p>"
        await send_bytes(send, status, html.encode(), [*HTML_HEADERS, *headers])
        return
    headers.append((b"cache-control", b"no-store"))
    # RFC 6749 §4.1.2.1 / §5.2 error shape, readable by the browser-based clients the
    # endpoints answer cross-origin (the refusal comes before their CORS wrapper)
    error = "invalid_request" if status == 413 else "temporarily_unavailable"
    body = json.dumps({"error": error, "error_description": message}).encode()
    await send_bytes(send, status, body, [*JSON_HEADERS, *headers])


class Throttle:
    def __init__(self, limits: OAuthLimits | None, clock: MonotonicMs) -> None:
        self._all = buckets(limits.per_minute, limits.per_minute, clock) if limits else None
        self._register = (
            buckets(limits.register_per_minute, limits.register_burst, clock) if limits else None
        )

    def wait(self, scope: Scope, *, register: bool) -> int | None:
        """Seconds until the caller may try again, or None to go ahead."""
        client = scope.get("client")
        caller = str(client[0]) if client else "unknown"
        for limit in (self._all, self._register if register else None):
            wait = limit.take(caller) if limit is not None else None
            if wait is not None:
                return max(1, math.ceil(wait))
        return None


class Throttled:
    """An endpoint behind the rate limits and the body cap (``page``: refusals in HTML)."""

    def __init__(self, app: ASGIApp, throttle: Throttle, *, page: bool, register: bool) -> None:
        self.app = app
        self._throttle = throttle
        self._page = page
        self._register = register

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] == "OPTIONS":  # CORS preflights
            await self.app(scope, receive, send)
            return
        wait = self._throttle.wait(scope, register=self._register)
        if wait is not None:
            text = f"Too many requests from this address: retry after {wait} s."
            await refuse(send, 429, text, page=self._page, wait=wait)
            return
        if scope["method"] == "POST":
            body = await read_body(receive, BODY_LIMIT, scope=scope)
            if body is None:
                text = f"The request body is over {BODY_LIMIT} bytes: send less."
                await refuse(send, 413, text, page=self._page, wait=None)
                return
            receive = replay(body, receive)

        async def unavailable(wait: int) -> None:
            text = f"The server's database cannot answer right now: retry after {wait} s."
            await refuse(send, 503, text, page=self._page, wait=wait)

        await unless_unavailable(self.app, scope, receive, send, unavailable)


def throttled(routes: list[Route], throttle: Throttle) -> list[Route]:
    """The routes, with every endpoint a client or browser posts to behind ``throttle``."""
    guarded = []
    for route in routes:
        if route.path in GUARDED_PATHS or route.path.startswith(PAGES_PREFIX):
            app = Throttled(
                route.app,
                throttle,
                page=route.path.startswith(PAGES_PREFIX),
                register=route.path == "/register",
            )
            route = Route(route.path, endpoint=app, methods=sorted(route.methods or ()))
        guarded.append(route)
    return guarded
