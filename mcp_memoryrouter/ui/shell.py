"""What stands around every answer under ``/ui``, whatever answers it (a page, a redirect, the
router's own 404 or 405, an unexpected error):

- the ``Host`` must be one this server is known by (the same list ``/mcp`` accepts), so a
  page on another name that resolves here (DNS rebinding) cannot use the explorer; a POST
  whose ``Origin`` is another site is refused too;
- the security headers (a strict Content-Security-Policy, no framing, no caching) are set on
  every response;
- an unexpected error is a plain 500 page, logged, never a trace.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from html import escape

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_memoryrouter.asgi import foreign_origin, host_allowed, send_bytes
from mcp_memoryrouter.auth.document import document

log = logging.getLogger(__name__)

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    # same-origin, not no-referrer: with no-referrer a browser sends "Origin: null" on a
    # form post, and the origin check below needs the real one
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
}


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
            await _refuse(
                send,
                421,
                "Misdirected request",
                "This server does not answer to that name. Set MEMORYROUTER_PUBLIC_URL, or add "
                "the name to MEMORYROUTER_ALLOWED_HOSTS.",
            )
            return
        if scope["method"] == "POST" and foreign_origin(headers.get("origin"), host):
            await _refuse(
                send, 403, "Refused", "This form was sent from another site. Nothing was changed."
            )
            return
        started = False

        async def secured(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                raw = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.decode("latin-1").lower() not in SECURITY_HEADERS
                    or k.decode("latin-1").lower() == "cache-control"
                ]
                present = {k.decode("latin-1").lower() for k, _ in raw}
                raw += [
                    (k.encode(), v.encode())
                    for k, v in SECURITY_HEADERS.items()
                    if k not in present
                ]
                message = {**message, "headers": raw}
            await send(message)

        try:
            await self._app(scope, receive, secured)
        except Exception:
            log.exception("the explorer failed on %s %s", scope["method"], scope["path"])
            if not started:
                await _refuse(
                    send, 500, "Something went wrong", "The page could not be made. Try again."
                )
            else:
                raise


async def _refuse(send: Send, status: int, title: str, message: str) -> None:
    content = f'<p class="error" role="alert">{escape(message)}</p>'
    page = document(
        title, content, site="Memory explorer", stylesheet_url="/ui/static/explorer.css"
    )
    body = page.encode()
    headers = [(b"content-type", b"text/html; charset=utf-8")]
    headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
    await send_bytes(send, status, body, headers)
