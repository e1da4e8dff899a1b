"""Memory keys as bearer tokens on /mcp: a key grants what it may do in its vault."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from mcp.server.auth.provider import AccessToken

from mcp_memoryrouter.auth.claims import VAULT_KEY_CLAIM, VAULT_REF_CLAIM
from mcp_memoryrouter.auth.scopes import scopes_for_key
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import Forbidden, Unauthorized
from mcp_memoryrouter.schemas import KeyInfo

CACHE_SECONDS = 30.0
CACHE_LIMIT = 10_000


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


class MemoryKeyVerifier:
    """A ``TokenVerifier``: asks the vault what the key may do (cached for 30 s)."""

    def __init__(self, client: VaultClient, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._cache: dict[str, tuple[float, AccessToken | None]] = {}
        self._clock = clock

    async def verify_token(self, token: str) -> AccessToken | None:
        if not looks_like_memory_key(token):
            return None
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = self._clock()
        cached = self._cache.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        info = await key_info_or_none(self._client, token)
        if info is None:
            result = None
        else:
            result = AccessToken(
                token=token,
                client_id="memory-key",
                scopes=sorted(scopes_for_key(info.read_only, info.mode)),
                subject=info.vault,
                claims={VAULT_KEY_CLAIM: token, VAULT_REF_CLAIM: info.vault},
            )
        if len(self._cache) >= CACHE_LIMIT:
            self._cache.clear()
        self._cache[digest] = (now + CACHE_SECONDS, result)
        return result
