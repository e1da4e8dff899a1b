"""The resource-server side of /mcp: who is calling, and the HTTP answer when they may not.

Which scope a tool or resource needs is decided in one place, when the call is bound to its
vault (``mcp/binding.py``, from ``scopes.yaml``), for HTTP and stdio alike. Over HTTP that
decision also reaches :class:`ScopeChallenge` (:func:`refuse_scope`), which answers the
request HTTP 403 with ``WWW-Authenticate: Bearer error="insufficient_scope", scope="…"``
instead of the tool error, so the client can step up (MCP authorization, "Scope challenge
handling"; RFC 6750 §3.1). The tool never runs: the decision comes before its body.
"""

from __future__ import annotations

from contextvars import ContextVar

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_memoryrouter.asgi import repeated_header, send_json
from mcp_memoryrouter.auth.scopes import FIRST_CONNECTION_SCOPES

# The scopes refused during the request being answered (set by ScopeChallenge; the call's
# handler runs in a copy of the request's context, so it sees the same list).
_refused: ContextVar[list[str] | None] = ContextVar("refused_scopes", default=None)


def refuse_scope(scope: str) -> None:
    """Record that the call being handled needs ``scope``, which its token lacks."""
    refused = _refused.get()
    if refused is not None:
        refused.append(scope)


def challenge(error: str, description: str, scope: str | None, metadata_url: str | None) -> str:
    parts = [f'error="{error}"', f'error_description="{description}"']
    if scope:
        parts.append(f'scope="{scope}"')
    if metadata_url:
        parts.append(f'resource_metadata="{metadata_url}"')
    return "Bearer " + ", ".join(parts)


async def deny(
    send: Send, status: int, error: str, description: str, scope: str, metadata_url: str | None
) -> None:
    header = challenge(error, description, scope, metadata_url)
    body = {"error": error, "error_description": description}
    await send_json(send, status, body, [(b"www-authenticate", header.encode())])


class SingleAuthorization:
    """ASGI wrapper outside the authentication middleware: an ``Authorization`` header sent
    twice (or comma-joined) is answered 400 ``invalid_request`` (RFC 6750 §3.1), since the
    bearer reader and anything after it could each take a different copy."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and repeated_header(scope["headers"], ["authorization"]):
            description = "send one Authorization header with one Bearer token"
            header = challenge("invalid_request", description, None, None)
            body = {"error": "invalid_request", "error_description": description}
            await send_json(send, 400, body, [(b"www-authenticate", header.encode())])
            return
        await self.app(scope, receive, send)


class ScopeChallenge:
    """ASGI wrapper inside the authentication middleware (``scope["user"]`` is set): 401
    without a valid token; 403 with the challenge when the call's scope was refused."""

    def __init__(self, app: ASGIApp, metadata_url: str | None = None) -> None:
        self.app = app
        self.metadata_url = metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not isinstance(scope.get("user"), AuthenticatedUser):
            presented = any(k.lower() == b"authorization" for k, _ in scope.get("headers", []))
            error = "invalid_token" if presented else "invalid_request"
            # what ordinary use needs, so one sign-in serves it (memories:delete by step-up)
            first = " ".join(FIRST_CONNECTION_SCOPES)
            await deny(send, 401, error, "authentication required", first, self.metadata_url)
            return
        refused: list[str] = []
        token = _refused.set(refused)
        replaced = False

        async def answer(message: Message) -> None:
            nonlocal replaced
            if replaced:  # the refused call's own answer is not sent
                return
            if refused and message["type"] == "http.response.start":
                replaced = True
                needed = refused[0]
                description = f"this call needs the {needed} scope"
                await deny(send, 403, "insufficient_scope", description, needed, self.metadata_url)
                return
            await send(message)

        try:
            await self.app(scope, receive, answer)
        finally:
            _refused.reset(token)
