"""Memory keys as bearer tokens on /mcp: a key grants what it may do in its vault."""

from __future__ import annotations

from mcp.server.auth.provider import AccessToken

from mcp_memoryrouter.auth.claims import (
    KEY_INFO_CLAIM,
    VAULT_CLIENT_CLAIM,
    VAULT_KEY_CLAIM,
    VAULT_REF_CLAIM,
)
from mcp_memoryrouter.auth.scopes import scopes_for_key
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import Forbidden, Unauthorized
from mcp_memoryrouter.schemas import KeyInfo


def looks_like_memory_key(token: str) -> bool:
    return token.startswith(("mk_", "mk-"))


async def key_info_or_none(vault: VaultClient, key: str) -> KeyInfo | None:
    """What the vault says of ``key`` now; None when it refuses it (unknown or revoked).

    Any other failure (the vault cannot be reached) is raised: it says nothing of the key.
    """
    try:
        return await vault.with_key(key).key_info()
    except (Unauthorized, Forbidden):
        return None


async def admitted_or_none(vault: VaultClient, key: str) -> tuple[KeyInfo, VaultClient] | None:
    """What the vault says of ``key`` now, and a client acting with the admission just made
    (for the rest of this request only); None when it refuses the key, as
    :func:`key_info_or_none`."""
    try:
        return await vault.with_key(key).admitted()
    except (Unauthorized, Forbidden):
        return None


class MemoryKeyVerifier:
    """A ``TokenVerifier``: asks the vault what the key may do, on every request.

    No answer is cached, so a key revoked a moment ago is refused on its very next request
    (one in-process call, or one round trip with ``MEMORYROUTER_API_URL``), as OAuth grants
    bound to a revoked key are. The request's tool calls act with this admission (in process,
    the key is looked up once per request, not once more per call).
    """

    def __init__(self, client: VaultClient) -> None:
        self._client = client

    async def verify_token(self, token: str) -> AccessToken | None:
        if not looks_like_memory_key(token):
            return None
        admitted = await admitted_or_none(self._client, token)
        if admitted is None:
            return None
        info, vault = admitted
        return AccessToken(
            token=token,
            client_id="memory-key",
            scopes=sorted(scopes_for_key(info.read_only, info.mode)),
            subject=info.vault,
            # KEY_INFO_CLAIM marks the token as a memory key, not an OAuth grant: a key cannot
            # step up, so what it may not do is not offered to it (mcp_server/binding.py). The token
            # lives for this one request, and so does the admission VAULT_CLIENT_CLAIM holds.
            claims={
                VAULT_KEY_CLAIM: token,
                VAULT_REF_CLAIM: info.vault,
                KEY_INFO_CLAIM: info,
                VAULT_CLIENT_CLAIM: vault,
            },
        )
