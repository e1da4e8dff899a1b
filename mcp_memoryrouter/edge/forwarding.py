"""What shows that a request came through a proxy, and the gate of a server without keys.

A reverse proxy or a tunnel on this machine connects from loopback on behalf of anyone, so a
loopback address alone says nothing about who is asking. :func:`relayed` names what gives a
relayed request away: a header a proxy adds (:data:`FORWARDING_HEADERS`, the one list every
rule reads), HTTP/1.0 (what nginx's ``proxy_pass`` speaks to its upstream unless told
otherwise, and no current client sends), or a client address that is not loopback.

:class:`LocalOnly` puts that rule in front of a server without keys
(``MEMORYROUTER_AUTH=none``): such a server acts with its one vault's key for whoever asks,
so it answers only clients on this machine that reach it directly, on every surface.

Which client address a request carries is decided before any of this, once, by ``serve``:
forwarding headers rewrite it only when the connection comes from a proxy named in
``MEMORYROUTER_TRUSTED_PROXIES`` (docs/security.md, "The edge").
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_memoryrouter.edge.addresses import is_loopback_peer
from mcp_memoryrouter.edge.responses import send_json
from mcp_memoryrouter.errors import ProxiedRequest

# What proxies, load balancers, CDNs and tunnels add to a request they relay (RFC 7239
# Forwarded, RFC 9110 §7.6.3 Via, and the de facto X-Forwarded-*, X-Real-IP and vendors' own)
FORWARDING_HEADERS = frozenset(
    {
        *(b"forwarded", b"via", b"x-real-ip", b"x-client-ip", b"x-cluster-client-ip"),
        *(b"x-forwarded-for", b"x-forwarded-host", b"x-forwarded-proto", b"x-forwarded-port"),
        *(b"x-forwarded-server", b"cf-connecting-ip", b"true-client-ip", b"fastly-client-ip"),
    }
)
AUTH_SETTING = "MEMORYROUTER_AUTH"


def relayed(scope: Scope) -> str | None:
    """What shows that this request did not come straight from a client on this machine
    (a forwarding header, HTTP/1.0, a client address that is not loopback), or None."""
    for name, _ in scope.get("headers", []):
        if name in FORWARDING_HEADERS:
            return f"it carries the header {name.decode('latin-1')}, which a proxy adds"
    if scope.get("http_version") == "1.0":
        return "it speaks HTTP/1.0, as a reverse proxy does to its upstream and no client does"
    client = scope.get("client")
    if not client:
        return "it has no client address (a Unix socket: anyone may be behind it)"
    if not is_loopback_peer(str(client[0])):
        return f"it comes from {client[0]}, not from this machine"
    return None


def refusal(reason: str) -> ProxiedRequest:
    return ProxiedRequest(
        f"this server has no keys ({AUTH_SETTING}=none) and answers only clients on this "
        f"machine that reach it directly, and this request came through a proxy: {reason}. "
        f"Behind a reverse proxy or a tunnel, run the server with {AUTH_SETTING}=key and "
        "send a memory key (or sign in with OAuth)",
        {"reason": reason, "setting": AUTH_SETTING},
    )


class LocalOnly:
    """``app`` for clients on this machine only: anything :func:`relayed` is 403
    ``proxied_request`` in the error envelope, before any route reads it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reason = relayed(scope) if scope["type"] in ("http", "websocket") else None
        if reason is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # RFC 6455: policy violation
        else:
            error = refusal(reason)
            await send_json(send, error.status, error.envelope())
