"""The resource-server side of /mcp: who is calling, and the HTTP answer when they may not.

Which scope a tool or resource needs is decided in one place, when the call is bound to its
vault (``mcp_server/binding.py``, from ``scopes.yaml``), for HTTP and stdio alike. Over HTTP that
decision also reaches :class:`ScopeChallenge` (:func:`refuse_scope`), which answers the
request HTTP 403 with ``WWW-Authenticate: Bearer error="insufficient_scope", scope="…"``
instead of the tool error, so the client can step up (MCP authorization, "Scope challenge
handling"; RFC 6750 §3.1). The tool never runs: the decision comes before its body.

A refusal says in words what the person must do, in the challenge's ``error_description``
and in the body, a JSON-RPC error (``id`` null: the request is not read) that an MCP client
shows as the call's error. Hosts that do not sign in again by themselves (Claude, on an
expired or revoked token, or after a refused refresh) leave the person only these words, so
they name where to reconnect.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import cast

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_memoryrouter.auth.resource.memory_keys import looks_like_memory_key
from mcp_memoryrouter.auth.scopes import FIRST_CONNECTION_SCOPES, SCOPE_WORDS
from mcp_memoryrouter.auth.scopes import Scope as OAuthScope
from mcp_memoryrouter.edge.requests import repeated_header
from mcp_memoryrouter.edge.responses import send_json, unless_unavailable
from mcp_memoryrouter.errors import StoreUnavailable
from mcp_memoryrouter.pages.document import PRODUCT

# JSON-RPC 2.0 leaves -32000 to -32099 to servers; MCP keeps -32000 to -32019 for
# implementations (the SDK uses -32000 and -32001 on the client side).
NOT_AUTHORIZED = -32011
WHERE = (
    "in your client's connector settings (Claude: Settings > Connectors; ChatGPT: Settings > "
    "Apps & Connectors)"
)
RECONNECT = f"reconnect {PRODUCT} {WHERE} and sign in again"

# The scopes refused during the request being answered (set by ScopeChallenge; the call's
# handler runs in a copy of the request's context, so it sees the same list).
_refused: ContextVar[list[str] | None] = ContextVar("refused_scopes", default=None)


def refuse_scope(scope: str) -> None:
    """Record that the call being handled needs ``scope``, which its token lacks."""
    refused = _refused.get()
    if refused is not None:
        refused.append(scope)


def unauthenticated(authorization: str | None) -> tuple[str, str]:
    """The OAuth error and the words for a request to /mcp that authenticates nobody, by the
    ``Authorization`` header it sent (None: none)."""
    if authorization is None:
        return "invalid_request", (
            f"No access token was sent. Connect {PRODUCT} {WHERE}: it opens this server's "
            "sign-in page. If it was connected before, its sign-in has ended: reconnect it "
            "there. A memory key may be sent instead, as a Bearer token."
        )
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() == "bearer" and looks_like_memory_key(token.strip()):
        return "invalid_token", (
            "This memory key is not accepted here: it was revoked, is mistyped, or belongs to "
            "another server. Send a key that `mcp-memoryrouter keys list` shows, or make one "
            "with `mcp-memoryrouter keys create`."
        )
    return "invalid_token", (
        "The access token has expired or was revoked. If your app does not sign in again by "
        f"itself, {RECONNECT}."
    )


def insufficient(scope: str) -> str:
    """The words of a 403 step-up challenge for ``scope``."""
    words = SCOPE_WORDS.get(cast(OAuthScope, scope), scope).lower()
    return (
        f"this call needs the {scope} scope ({words}), which this connection was not given: "
        f"allow it when your app asks, or {RECONNECT} and tick it"
    )


def rpc_error(error: str, description: str) -> dict[str, object]:
    """The body of a refusal: a JSON-RPC error an MCP client shows as the call's error,
    carrying the OAuth error too."""
    data = {"error": error, "error_description": description}
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": NOT_AUTHORIZED, "message": description, "data": data},
    }


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
    await send_json(
        send, status, rpc_error(error, description), [(b"www-authenticate", header.encode())]
    )


class SingleAuthorization:
    """ASGI wrapper outside the authentication middleware: an ``Authorization`` header sent
    twice (or comma-joined) is answered 400 ``invalid_request`` (RFC 6750 §3.1), since the
    bearer reader and anything after it could each take a different copy. A token that
    cannot be checked because the database is away is answered 503 with ``Retry-After``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and repeated_header(scope["headers"], ["authorization"]):
            description = "send one Authorization header with one Bearer token"
            header = challenge("invalid_request", description, None, None)
            body = {"error": "invalid_request", "error_description": description}
            await send_json(send, 400, body, [(b"www-authenticate", header.encode())])
            return

        async def unavailable(wait: int) -> None:  # a token's grant could not be read
            error = StoreUnavailable(
                f"the server's database cannot answer right now; try again in {wait} s",
                {"retry_after": wait},
            )
            await send_json(send, 503, error.envelope(), [(b"retry-after", str(wait).encode())])

        await unless_unavailable(self.app, scope, receive, send, unavailable)


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
            sent = [v for k, v in scope.get("headers", []) if k.lower() == b"authorization"]
            error, words = unauthenticated(sent[0].decode("latin-1") if sent else None)
            # what ordinary use needs, so one sign-in serves it (memories:delete by step-up)
            first = " ".join(FIRST_CONNECTION_SCOPES)
            await deny(send, 401, error, words, first, self.metadata_url)
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
                words = insufficient(needed)
                await deny(send, 403, "insufficient_scope", words, needed, self.metadata_url)
                return
            await send(message)

        try:
            await self.app(scope, receive, answer)
        finally:
            _refused.reset(token)
