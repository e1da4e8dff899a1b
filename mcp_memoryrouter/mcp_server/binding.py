"""Which vault a call works on, with which key, and whether it may: the one scope decision.

An authenticated HTTP request carries an access token whose claims name the memory key
the grant is bound to (never the client's own token). Without a token (stdio, or the
unauthenticated local mode) the server's configured key is used, with the scopes that key
allows. Every tool and resource is bound through :meth:`Binder.bind`, which refuses a call
whose scope (from ``scopes.yaml``) was not granted. An OAuth grant is answered with an HTTP
403 step-up challenge (:func:`~mcp_memoryrouter.auth.resource.refuse_scope`): its client can ask
for the scope. A memory key (as the bearer token, or the server's own under stdio) cannot
step up, so it is answered with a tool error saying what the key is and how to get one that
may (:func:`key_refusal`), and the tools and resources it may not use are not listed to it
(``catalog.py``).

Tools receive their binding by injection (the SDK's ``Resolve``): a parameter typed
:data:`Vault` is filled by :func:`bind_call` before the tool body runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Resolve

from mcp_memoryrouter.auth.claims import (
    KEY_INFO_CLAIM,
    VAULT_CLIENT_CLAIM,
    VAULT_KEY_CLAIM,
    VAULT_REF_CLAIM,
)
from mcp_memoryrouter.auth.resource import refuse_scope
from mcp_memoryrouter.auth.scopes import (
    ALL_SCOPES,
    TOOL_HINTS,
    Scope,
    ScopePolicy,
    ability,
    scopes_for_key,
)
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.mcp_server.budget import ResultBudget
from mcp_memoryrouter.mcp_server.errors import backend_errors
from mcp_memoryrouter.schemas import KeyInfo, client_label

_MODE: dict[str, str] = {
    "read": "retrieves but never stores",
    "write": "stores but never retrieves",
    "off": "neither retrieves nor stores",
}


@dataclass(frozen=True)
class VaultBinding:
    """One call's vault: the client acting with its key, what was granted, and how much a
    result may hold."""

    client: VaultClient
    scopes: frozenset[Scope]
    vault_ref: str
    budget: ResultBudget
    # what the memory key acting may do; None when the call comes with an OAuth grant
    key: KeyInfo | None = None


class KeyRefused(ToolError):
    """Raised when a memory key may not make the call: it cannot step up, so this says why
    and what to use instead."""


class Binder:
    """Binds calls to vaults (the MCP server's lifespan context: one per server)."""

    def __init__(
        self,
        client: VaultClient,
        policy: ScopePolicy,
        budget: ResultBudget,
        default_key: str | None = None,
    ) -> None:
        self.policy = policy
        self.budget = budget
        self._client = client
        self._default_key = default_key
        self._default: VaultBinding | None = None

    async def bind(self, needed: Scope) -> VaultBinding:
        """The current call's binding, when it was granted ``needed``."""
        binding = await self._current()
        if needed in binding.scopes:
            return binding
        if binding.key is not None:
            raise KeyRefused(key_refusal(binding.key, needed))
        refuse_scope(needed)  # an OAuth grant: its client may ask for the scope (step-up)
        raise ToolError(f"insufficient_scope: this call needs the {needed} scope")

    async def key_scopes(self) -> frozenset[Scope] | None:
        """What the memory key behind the current request may do; None when the request
        comes with an OAuth grant (offered everything: it may step up), or when no binding
        can be made now (a call then says why)."""
        try:
            binding = await self._current()
        except ToolError:
            return None
        return None if binding.key is None else binding.scopes

    async def _current(self) -> VaultBinding:
        token = get_access_token()
        if token is not None:
            claims = token.claims or {}
            key = claims.get(VAULT_KEY_CLAIM)
            if not isinstance(key, str):
                raise ToolError("this access token is not bound to a vault")
            scopes = frozenset(s for s in token.scopes if s in ALL_SCOPES)
            ref = str(claims.get(VAULT_REF_CLAIM, ""))
            info = claims.get(KEY_INFO_CLAIM)
            held = info if isinstance(info, KeyInfo) else None
            # a memory key's client comes admitted by the token check of this very request
            admitted = claims.get(VAULT_CLIENT_CLAIM)
            vault = admitted if isinstance(admitted, VaultClient) else self._client.with_key(key)
            return self._binding(vault, scopes, ref, held)
        if self._default_key is None:
            raise ToolError("not authenticated: send a bearer token")
        if self._default is None:
            vault = self._client.with_key(self._default_key)
            async with backend_errors():
                info = await vault.key_info()
            self._default = self._binding(
                vault, scopes_for_key(info.read_only, info.mode), info.vault, info
            )
        return self._default

    def _binding(
        self, vault: VaultClient, scopes: frozenset[Scope], ref: str, key: KeyInfo | None
    ) -> VaultBinding:
        return VaultBinding(vault, scopes, ref, self.budget, key)


def key_refusal(key: KeyInfo, needed: Scope) -> str:
    """Why a memory key may not make a call that needs ``needed``, and what to use instead."""
    what = ability(needed)
    reads_only = TOOL_HINTS[needed][0]
    if key.read_only and not reads_only:
        return (
            f"insufficient_scope: this memory key is read-only, so it cannot {what}. "
            "Connect with a read-write key of this vault instead: make one with "
            f"`mcp-memoryrouter keys create --vault {key.vault}` where the server's data "
            "lives, or POST /v1/keys with a read-write key (docs/keys.md)."
        )
    return (
        f"insufficient_scope: this memory key is sent with :{key.mode}, which "
        f"{_MODE.get(key.mode, 'narrows what it does')}, so it cannot {what}. "
        f"Send the key without :{key.mode} to {what}."
    )


async def bind_call(ctx: Context[Any, Any]) -> VaultBinding:
    """The resolver of :data:`Vault`: the binding of the tool being called."""
    binder = ctx.request_context.lifespan_context
    if not isinstance(binder, Binder):
        raise TypeError("the server's lifespan context must be its Binder")
    name = str((ctx.request_context.params or {}).get("name"))
    needed = binder.policy.for_tool(name)
    if needed is None:  # the catalog checks scopes.yaml covers every tool at start-up
        raise ToolError(f"tool {name!r} has no scope in scopes.yaml")
    binding = await binder.bind(needed)
    # what a tool stores is the MCP surface's, of the client that called it (stored_by)
    return replace(binding, client=binding.client.as_surface("mcp", client_name(ctx)))


def client_name(ctx: Context[Any, Any]) -> str | None:
    """The calling client's name: the one it gave with the call (``clientInfo``: every call
    of the 2026 protocol carries it, a stateless 2025 call none), else the client id of its
    OAuth grant (a memory key sent as the token has none); as the vault keeps it
    (``schemas.client_label``)."""
    params = ctx.request_context.session.client_params
    info = None if params is None else params.client_info
    name = None if info is None else info.name
    token = get_access_token()
    if not name and token is not None and KEY_INFO_CLAIM not in (token.claims or {}):
        name = token.client_id
    return client_label(name)


Vault = Annotated[VaultBinding, Resolve(bind_call)]
