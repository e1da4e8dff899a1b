"""What stands around every answer under ``/ui``, whatever answers it (a page, a redirect, the
router's own 404 or 405, an unexpected error):

- the ``Host`` must be one this server is known by (the same list ``/mcp`` accepts), so a
  page on another name that resolves here (DNS rebinding) cannot use the explorer; a POST
  whose ``Origin`` is another site is refused too;
- the security headers (``pages.headers.EXPLORER_HEADERS``: a strict
  Content-Security-Policy, no framing, no caching) are set on every response;
- a database that cannot answer (a restart, a failover) is a 503 page with ``Retry-After``;
- an unexpected error is a plain 500 page, logged, never a trace.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_memoryrouter.edge.requests import foreign_origin, host_allowed
from mcp_memoryrouter.edge.responses import send_bytes, unless_unavailable
from mcp_memoryrouter.pages.document import alert, document
from mcp_memoryrouter.pages.headers import EXPLORER_HEADERS, raw

log = logging.getLogger(__name__)

MISDIRECTED = (
    "This server does not answer to that name. Set MEMORYROUTER_PUBLIC_URL, or add the name "
    "to MEMORYROUTER_ALLOWED_HOSTS."
)


class Shell:
    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str]) -> None:
        self._app = app
        self._hosts = list(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if not host_allowed(host, self._hosts):
            await _refuse(send, 421, "Misdirected request", MISDIRECTED)
            return
        if scope["method"] == "POST" and foreign_origin(headers.get("origin"), host):
            await _refuse(
                send, 403, "Refused", "This form was sent from another site. Nothing was changed."
            )
            return
        secured = Secured(send)

        async def unavailable(wait: int) -> None:
            text = f"The server's database cannot answer right now. Try again in {wait} s."
            await _refuse(send, 503, "Try again in a moment", text, retry_after=wait)

        try:
            await unless_unavailable(self._app, scope, receive, secured, unavailable)
        except Exception:
            log.exception("the explorer failed on %s %s", scope["method"], scope["path"])
            if secured.started:
                raise
            await _refuse(
                send, 500, "Something went wrong", "The page could not be made. Try again."
            )


class Secured:
    """``send``, with the security headers put on the response's start (a handler's own
    ``cache-control`` kept: an asset may be cached)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            message = {**message, "headers": secured(message.get("headers", []))}
        await self._send(message)


def secured(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    kept = [
        (name, value)
        for name, value in headers
        if (lowered := name.decode("latin-1").lower()) not in EXPLORER_HEADERS
        or lowered == "cache-control"
    ]
    present = {name.decode("latin-1").lower() for name, _ in kept}
    return kept + raw({k: v for k, v in EXPLORER_HEADERS.items() if k not in present})


async def _refuse(
    send: Send, status: int, title: str, message: str, *, retry_after: int | None = None
) -> None:
    page = document(
        title, alert(message), site="Memory explorer", stylesheet_url="/ui/static/explorer.css"
    )
    headers = [(b"content-type", b"text/html; charset=utf-8"), *raw(EXPLORER_HEADERS)]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send_bytes(send, status, page.encode(), headers)
