"""Which vault a call works on, with which key, and whether it may: the one scope decision.

An authenticated HTTP request carries an access token whose claims name the memory key
the grant is bound to (never the client's own token). Without a token (stdio, or the
unauthenticated local mode) the server's configured key is used, with the scopes that key
allows. Every tool and resource is bound through :meth:`Binder.bind`, which refuses a call
whose scope (from ``scopes.yaml``) was not granted: a tool error under stdio, an HTTP 403
step-up challenge over HTTP (:func:`~mcp_memoryrouter.auth.resource.refuse_scope`).

Tools receive their binding by injection (the SDK's ``Resolve``): a parameter typed
:data:`Vault` is filled by :func:`bind_call` before the tool body runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Resolve

from mcp_memoryrouter.auth.claims import VAULT_KEY_CLAIM, VAULT_REF_CLAIM
from mcp_memoryrouter.auth.resource import refuse_scope
from mcp_memoryrouter.auth.scopes import ALL_SCOPES, Scope, ScopePolicy, scopes_for_key
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.mcp.budget import Budget
from mcp_memoryrouter.mcp.errors import backend_errors


@dataclass(frozen=True)
class VaultBinding:
    """One call's vault: the client acting with its key, what was granted, and how much a
    result may hold."""

    client: VaultClient
    scopes: frozenset[Scope]
    vault_ref: str
    budget: Budget
    # what a checkout's contract costs at each source tier, as the last checkout measured it
    contract_tokens: dict[int, int] = field(default_factory=dict)


class Binder:
    """Binds calls to vaults (the MCP server's lifespan context: one per server)."""

    def __init__(
        self,
        client: VaultClient,
        policy: ScopePolicy,
        budget: Budget,
        default_key: str | None = None,
    ) -> None:
        self.policy = policy
        self.budget = budget
        self._client = client
        self._default_key = default_key
        self._default: VaultBinding | None = None
        self._contract_tokens: dict[int, int] = {}

    async def bind(self, needed: Scope) -> VaultBinding:
        """The current call's binding, when it was granted ``needed``."""
        binding = await self._current()
        if needed not in binding.scopes:
            refuse_scope(needed)
            raise ToolError(f"insufficient_scope: this call needs the {needed} scope")
        return binding

    async def _current(self) -> VaultBinding:
        token = get_access_token()
        if token is not None:
            claims = token.claims or {}
            key = claims.get(VAULT_KEY_CLAIM)
            if not isinstance(key, str):
                raise ToolError("this access token is not bound to a vault")
            scopes = frozenset(s for s in token.scopes if s in ALL_SCOPES)
            ref = str(claims.get(VAULT_REF_CLAIM, ""))
            return self._binding(self._client.with_key(key), scopes, ref)
        if self._default_key is None:
            raise ToolError("not authenticated: send a bearer token")
        if self._default is None:
            vault = self._client.with_key(self._default_key)
            async with backend_errors():
                info = await vault.key_info()
            self._default = self._binding(
                vault, scopes_for_key(info.read_only, info.mode), info.vault
            )
        return self._default

    def _binding(self, vault: VaultClient, scopes: frozenset[Scope], ref: str) -> VaultBinding:
        return VaultBinding(vault, scopes, ref, self.budget, self._contract_tokens)


async def bind_call(ctx: Context[Any, Any]) -> VaultBinding:
    """The resolver of :data:`Vault`: the binding of the tool being called."""
    binder = ctx.request_context.lifespan_context
    if not isinstance(binder, Binder):
        raise TypeError("the server's lifespan context must be its Binder")
    name = str((ctx.request_context.params or {}).get("name"))
    needed = binder.policy.for_tool(name)
    if needed is None:  # the catalog checks scopes.yaml covers every tool at start-up
        raise ToolError(f"tool {name!r} has no scope in scopes.yaml")
    return await binder.bind(needed)


Vault = Annotated[VaultBinding, Resolve(bind_call)]
