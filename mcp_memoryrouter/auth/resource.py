"""The resource-server side of /mcp: who is calling, and may they call this tool.

Per-tool scopes are enforced before dispatch: a ``tools/call`` (or ``resources/read``) whose
token lacks the scope ``scopes.yaml`` names is answered HTTP 403 with
``WWW-Authenticate: Bearer error="insufficient_scope", scope="…"`` so the client can step up
(MCP authorization, "Scope challenge handling"; RFC 6750 §3.1).
"""

from __future__ import annotations

import json
import re
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.types import CallToolResult
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_memoryrouter.asgi import read_body, repeated_header, replay, send_json
from mcp_memoryrouter.auth.scopes import FIRST_CONNECTION_SCOPES, ScopePolicy

MAX_BODY = 4 * 1024 * 1024  # the MCP SDK's own request limit
# The in-tool backstop's message; ``InBandChallenge`` recognises it in an isError result.
INSUFFICIENT_SCOPE = "insufficient_scope: this tool needs the {scope} scope"
_INSUFFICIENT = re.compile(r"^insufficient_scope: this tool needs the (memories:[a-z]+) scope$")


def challenge(error: str, description: str, scope: str | None, metadata_url: str | None) -> str:
    parts = [f'error="{error}"', f'error_description="{description}"']
    if scope:
        parts.append(f'scope="{scope}"')
    if metadata_url:
        parts.append(f'resource_metadata="{metadata_url}"')
    return "Bearer " + ", ".join(parts)


def _required(policy: ScopePolicy, rpc: Any) -> str | None:
    """The scope one JSON-RPC message needs beyond authentication, if any."""
    if not isinstance(rpc, dict):
        return None
    params = rpc.get("params") if isinstance(rpc.get("params"), dict) else {}
    assert isinstance(params, dict)
    if rpc.get("method") == "tools/call":
        return policy.for_tool(str(params.get("name")))
    if rpc.get("method") == "resources/read":
        return policy.for_resource(str(params.get("uri")))
    return None


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


class ScopeGate:
    """ASGI wrapper inside the authentication middleware (``scope["user"]`` is set)."""

    def __init__(self, app: ASGIApp, policy: ScopePolicy, metadata_url: str | None = None) -> None:
        self.app = app
        self.policy = policy
        self.metadata_url = metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        user = scope.get("user")
        if not isinstance(user, AuthenticatedUser):
            presented = any(k.lower() == b"authorization" for k, _ in scope.get("headers", []))
            error = "invalid_token" if presented else "invalid_request"
            # what ordinary use needs, so one sign-in serves it (memories:delete by step-up)
            first = " ".join(FIRST_CONNECTION_SCOPES)
            await self._deny(send, 401, error, "authentication required", first)
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await read_body(receive, MAX_BODY)
        if body is None:
            await send_json(send, 413, {"error": "request body too large"})
            return
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            # the MCP transport answers malformed (or absurdly nested) JSON itself
            message = None
        granted = set(user.scopes)
        for rpc in message if isinstance(message, list) else [message]:
            needed = _required(self.policy, rpc)
            if needed is not None and needed not in granted:
                await self._deny(
                    send, 403, "insufficient_scope", f"this call needs the {needed} scope", needed
                )
                return
        await self.app(scope, replay(body, receive), send)

    async def _deny(
        self, send: Send, status: int, error: str, description: str, needed: str
    ) -> None:
        header = challenge(error, description, needed, self.metadata_url)
        body = {"error": error, "error_description": description}
        await send_json(send, status, body, [(b"www-authenticate", header.encode())])


class InBandChallenge:
    """MCP server middleware: a tool call refused by the in-tool scope backstop carries the
    challenge in ``_meta["mcp/www_authenticate"]`` too, the signal ChatGPT reads to run its
    OAuth linking again (OpenAI Apps SDK, "Triggering authentication from a tool")."""

    def __init__(self, metadata_url: str) -> None:
        self.metadata_url = metadata_url

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "tools/call" or not isinstance(result, CallToolResult):
            return result
        if not result.is_error or len(result.content) != 1:
            return result
        match = _INSUFFICIENT.match(getattr(result.content[0], "text", ""))
        if match is None:
            return result
        description = f"this call needs the {match.group(1)} scope"
        header = challenge("insufficient_scope", description, match.group(1), self.metadata_url)
        meta = {**(result.meta or {}), "mcp/www_authenticate": [header]}
        return result.model_copy(update={"meta": meta})
