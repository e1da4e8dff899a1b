"""Access tokens: short-lived JWTs signed with ES256 (RFC 9068 shape), and the JWKS that
verifies them. The signing key lives in the data directory (0600) so tokens survive restarts."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, KeySet

from mcp_memoryrouter.auth.keyfiles import read_or_create

SIGNING_KEY_FILE = "oauth-signing-key.json"
ALGORITHM = "ES256"
GRANT_CLAIM = "gid"  # the grant a token was issued from; the verifier looks the binding up


def _new_key() -> bytes:
    key = ECKey.generate_key(
        "P-256",
        parameters={"kid": secrets.token_urlsafe(8), "use": "sig", "alg": ALGORITHM},
        private=True,
    )
    return json.dumps(key.as_dict(private=True)).encode()


class Signer:
    """Signs and verifies this server's access tokens."""

    def __init__(self, key: ECKey) -> None:
        self._key = key
        self.kid = str(key.kid)
        self._public = KeySet([ECKey.import_key(key.as_dict(private=False))])

    @classmethod
    def in_dir(cls, data_dir: Path) -> Signer:
        raw = read_or_create(data_dir / SIGNING_KEY_FILE, _new_key)
        return cls(ECKey.import_key(json.loads(raw)))

    def jwks(self) -> dict[str, Any]:
        """The public half only (RFC 7517)."""
        return dict(self._public.as_dict(private=False))

    def sign(self, claims: dict[str, Any]) -> str:
        header = {"alg": ALGORITHM, "kid": self.kid, "typ": "at+jwt"}  # RFC 9068 §2.1
        return jwt.encode(header, claims, self._key)

    def verify(
        self, token: str, *, issuer: str, audience: str, now: Callable[[], int]
    ) -> dict[str, Any] | None:
        """The claims of a token this server signed for ``audience``, still valid at ``now()``;
        None for anything else (bad signature, other issuer or audience, expired, malformed)."""
        try:
            decoded = jwt.decode(token, self._public, algorithms=[ALGORITHM])
            registry = jwt.JWTClaimsRegistry(
                now=now,
                iss={"essential": True, "value": issuer},  # RFC 9068 §4: exact match
                aud={"essential": True, "value": audience},  # RFC 8707: issued for us
                exp={"essential": True},
                sub={"essential": True},
                client_id={"essential": True},
                gid={"essential": True},  # GRANT_CLAIM
            )
            registry.validate(decoded.claims)
        except (JoseError, ValueError):
            return None
        return dict(decoded.claims)
