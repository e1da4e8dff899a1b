"""External authorization server mode: /mcp accepts JWT access tokens from an operator's own
identity provider, validated against its JWKS.

The token must come from the configured issuer (exact string), be issued for this resource
(``aud``, RFC 8707), be unexpired, and carry a claim naming a vault binding; the operator's
bindings file maps each such name to the memory key the MCP server calls the vault with.
Scopes come from ``scope`` (space-separated, RFC 9068) or ``scp`` (a list).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx2
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet
from mcp.server.auth.provider import AccessToken

from mcp_memoryrouter.auth.claims import VAULT_KEY_CLAIM, VAULT_REF_CLAIM
from mcp_memoryrouter.auth.scopes import ALL_SCOPES
from mcp_memoryrouter.errors import StartupError

ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"]
JWKS_TTL = 600.0
REFETCH_AFTER = 30.0  # an unknown kid refetches the JWKS at most this often (key rotation)


class BindingsError(StartupError):
    """Raised when the bindings file is missing, malformed or readable by others."""


def load_bindings(path: Path) -> dict[str, str]:
    """``{"<claim value>": "mk_…"}`` from a JSON file that only its owner may read."""
    try:
        mode = os.stat(path).st_mode
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BindingsError(f"cannot read the OAuth bindings file {path}: {exc}") from exc
    if mode & 0o077:
        raise BindingsError(f"the OAuth bindings file {path} holds keys: chmod 600 it")
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise BindingsError(f"{path} must be a JSON object of claim values to memory keys")
    return data


class RemoteKeys:
    """The issuer's JWKS, cached; refetched when a token names a key id it has not seen."""

    def __init__(
        self, http: httpx2.AsyncClient, url: str, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._http = http
        self._url = url
        self._clock = clock
        self._keys: KeySet | None = None
        self._fetched = float("-inf")

    async def aclose(self) -> None:
        await self._http.aclose()

    async def get(self, *, refresh: bool = False) -> KeySet | None:
        now = self._clock()
        stale = now - self._fetched > JWKS_TTL
        if self._keys is None or stale or (refresh and now - self._fetched > REFETCH_AFTER):
            try:
                response = await self._http.get(self._url, timeout=10)
                response.raise_for_status()
                self._keys = KeySet.import_key_set(response.json())
                self._fetched = now
            except (httpx2.HTTPError, ValueError, JoseError):
                pass  # keep the last good set; an outage is not a reason to accept nothing new
        return self._keys


class ExternalTokenVerifier:
    """A ``TokenVerifier`` for JWTs from an external issuer."""

    def __init__(
        self,
        keys: RemoteKeys,
        bindings: Mapping[str, str],
        *,
        issuer: str,
        audience: str,
        vault_claim: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._keys = keys
        self._bindings = bindings
        self.issuer = issuer
        self._audience = audience
        self._vault_claim = vault_claim
        self._clock = clock

    async def aclose(self) -> None:
        await self._keys.aclose()

    async def _decode(self, token: str) -> dict[str, Any] | None:
        for refresh in (False, True):
            keys = await self._keys.get(refresh=refresh)
            if keys is None:
                return None
            try:
                return dict(jwt.decode(token, keys, algorithms=ALGORITHMS).claims)
            except InvalidKeyIdError:
                continue
            except (JoseError, ValueError):
                return None
        return None

    async def verify_token(self, token: str) -> AccessToken | None:
        if token.count(".") != 2:
            return None
        claims = await self._decode(token)
        if claims is None:
            return None
        registry = jwt.JWTClaimsRegistry(
            now=lambda: int(self._clock()),
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "value": self._audience},
            exp={"essential": True},
        )
        try:
            registry.validate(claims)
        except JoseError:
            return None
        binding = claims.get(self._vault_claim)
        key = self._bindings.get(binding) if isinstance(binding, str) else None
        if key is None:
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("azp") or "external"),
            scopes=[s for s in _scopes(claims) if s in ALL_SCOPES],
            expires_at=int(claims["exp"]),
            resource=self._audience,
            subject=str(claims.get("sub", binding)),
            claims={VAULT_KEY_CLAIM: key, VAULT_REF_CLAIM: binding, "iss": self.issuer},
        )


def _scopes(claims: dict[str, Any]) -> list[str]:
    scope = claims.get("scope")
    if isinstance(scope, str):
        return scope.split()
    scp = claims.get("scp")
    if isinstance(scp, list):
        return [str(s) for s in scp]
    return scp.split() if isinstance(scp, str) else []
