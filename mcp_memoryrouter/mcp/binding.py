"""Which vault a tool call works on, with which key and which granted scopes.

An authenticated HTTP request carries an access token whose claims name the memory key
the grant is bound to (never the client's own token). Without a token (stdio, or the
unauthenticated local mode) the server's configured key is used.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver.exceptions import ToolError

from mcp_memoryrouter.auth.claims import VAULT_KEY_CLAIM, VAULT_REF_CLAIM
from mcp_memoryrouter.auth.resource import INSUFFICIENT_SCOPE
from mcp_memoryrouter.auth.scopes import Scope, scopes_for_key
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.mcp.tools import backend_errors


@dataclass(frozen=True)
class VaultBinding:
    vault: VaultClient
    scopes: frozenset[Scope]
    vault_ref: str

    def require(self, scope: Scope) -> None:
        """The in-tool backstop of the HTTP scope gate."""
        if scope not in self.scopes:
            raise ToolError(INSUFFICIENT_SCOPE.format(scope=scope))


Resolver = Callable[[], Awaitable[VaultBinding]]


class Binder:
    """Resolve the binding of the current request."""

    def __init__(self, client: VaultClient, default_key: str | None = None) -> None:
        self._client = client
        self._default_key = default_key
        self._default: VaultBinding | None = None

    async def __call__(self) -> VaultBinding:
        token = get_access_token()
        if token is not None:
            claims = token.claims or {}
            key = claims.get(VAULT_KEY_CLAIM)
            if not isinstance(key, str):
                raise ToolError("this access token is not bound to a vault")
            scopes = frozenset(s for s in token.scopes if s.startswith("memories:"))
            ref = str(claims.get(VAULT_REF_CLAIM, ""))
            return VaultBinding(self._client.with_key(key), scopes, ref)  # type: ignore[arg-type]
        if self._default_key is None:
            raise ToolError("not authenticated: send a bearer token")
        if self._default is None:
            vault = self._client.with_key(self._default_key)
            async with backend_errors():
                info = await vault.key_info()
            self._default = VaultBinding(
                vault, scopes_for_key(info.read_only, info.mode), info.vault
            )
        return self._default
