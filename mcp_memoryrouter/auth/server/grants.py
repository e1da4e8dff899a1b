"""The access tokens this authorization server issues, verified where /mcp checks them.

A JWT names its grant; the grant names the memory key (sealed at rest) the MCP server calls
the vault with. The key goes into the in-process ``AccessToken.claims``, never on the wire.
Each request asks the vault whether it still accepts that key, so revoking a memory key ends
every grant bound to it at once: the next request is answered 401 ``invalid_token``. In
process, that one admission is what the request's tool calls act with (the key is looked up
once per request, as a memory key sent as the bearer token is).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from mcp.server.auth.provider import AccessToken

from mcp_memoryrouter.auth.claims import VAULT_CLIENT_CLAIM, VAULT_KEY_CLAIM, VAULT_REF_CLAIM
from mcp_memoryrouter.auth.resource import admitted_or_none
from mcp_memoryrouter.auth.server.signing import GRANT_CLAIM, TokenKeys
from mcp_memoryrouter.auth.state.database import off_loop
from mcp_memoryrouter.auth.state.sealing import Sealer
from mcp_memoryrouter.auth.state.store import AuthStore
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import MemoryRouterError


async def still_admitted(vault: VaultClient, key: str | None) -> tuple[bool, VaultClient | None]:
    """Whether the vault still accepts the memory key, and the client acting with the
    admission just made (None over HTTP, and when the vault cannot be reached: that says
    nothing of the key, and every call the token could make fails anyway)."""
    if key is None:
        return False, None
    try:
        admitted = await admitted_or_none(vault, key)
    except MemoryRouterError:
        return True, None
    return (False, None) if admitted is None else (True, admitted[1])


async def key_still_accepted(vault: VaultClient, key: str | None) -> bool:
    """False once the vault refuses the memory key (revoked); True while it accepts it, and
    while the vault cannot be reached."""
    accepted, _ = await still_admitted(vault, key)
    return accepted


class GrantTokenVerifier:
    """A ``TokenVerifier`` for the access tokens the embedded authorization server issues."""

    def __init__(
        self,
        signer: TokenKeys,
        store: AuthStore,
        sealer: Sealer,
        vault: VaultClient,
        *,
        issuer: str,
        resource: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._signer = signer
        self._store = store
        self._sealer = sealer
        self._vault = vault
        self.issuer = issuer
        self.resource = resource
        self._clock = clock

    async def verify_token(self, token: str) -> AccessToken | None:
        if token.count(".") != 2:
            return None
        claims = self._signer.verify(
            token, issuer=self.issuer, audience=self.resource, now=lambda: int(self._clock())
        )
        if claims is None:
            return None
        grant_id = str(claims[GRANT_CLAIM])
        grant = await off_loop(self._store.remote, lambda: self._store.grant(grant_id))
        if grant is None or grant.revoked or grant.client_id != claims["client_id"]:
            return None
        key = self._sealer.unseal(grant.sealed_key)
        accepted, admitted = await still_admitted(self._vault, key)
        if key is None or not accepted:
            return None
        scopes = [s for s in str(claims.get("scope", "")).split() if s in grant.scopes]
        return AccessToken(
            token=token,
            client_id=str(claims["client_id"]),
            scopes=scopes,
            expires_at=int(claims["exp"]),
            resource=self.resource,
            subject=str(claims["sub"]),
            claims={
                VAULT_KEY_CLAIM: key,
                VAULT_REF_CLAIM: grant.vault_ref,
                GRANT_CLAIM: grant.id,
                "iss": self.issuer,
                # the admission lives for this one request, as the token does
                **({} if admitted is None else {VAULT_CLIENT_CLAIM: admitted}),
            },
        )
