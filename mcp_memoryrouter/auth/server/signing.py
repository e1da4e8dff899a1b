"""Access tokens: short-lived JWTs signed with ES256 (RFC 9068 shape), and the JWKS that
verifies them. On SQLite the signing key lives in the data directory (0600) so tokens survive
restarts, and never changes; on PostgreSQL replicas share a rotating set of keys
(``auth/server/signing_keys.py``)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import ECKey, KeySet

from mcp_memoryrouter.auth.state.keyfiles import read_or_create

SIGNING_KEY_FILE = "oauth-signing-key.json"
ALGORITHM = "ES256"
GRANT_CLAIM = "gid"  # the grant a token was issued from; the verifier looks the binding up


class TokenKeys(Protocol):
    """What signs and verifies access tokens: :class:`Signer` (one key in a file) or
    ``signing_keys.SigningKeys`` (keys shared in PostgreSQL, rotated)."""

    @property
    def kid(self) -> str: ...

    def jwks(self) -> dict[str, Any]: ...

    def sign(self, claims: dict[str, Any]) -> str: ...

    def verify(
        self, token: str, *, issuer: str, audience: str, now: Callable[[], int]
    ) -> dict[str, Any] | None: ...


def new_key() -> ECKey:
    return ECKey.generate_key(
        "P-256",
        parameters={"kid": secrets.token_urlsafe(8), "use": "sig", "alg": ALGORITHM},
        private=True,
    )


def _new_key() -> bytes:
    return json.dumps(new_key().as_dict(private=True)).encode()


def public_half(key: ECKey) -> ECKey:
    return ECKey.import_key(key.as_dict(private=False))


def sign_with(key: ECKey, claims: dict[str, Any]) -> str:
    header = {"alg": ALGORITHM, "kid": str(key.kid), "typ": "at+jwt"}  # RFC 9068 §2.1
    return jwt.encode(header, claims, key)


def verify_with(
    keys: KeySet, token: str, *, issuer: str, audience: str, now: Callable[[], int]
) -> dict[str, Any] | None:
    """The claims of a token one of ``keys`` signed for ``audience``, still valid at ``now()``;
    None for anything else (bad signature, other issuer or audience, expired, malformed).
    Raises ``InvalidKeyIdError`` when the token names a key not in ``keys``."""
    try:
        decoded = jwt.decode(token, keys, algorithms=[ALGORITHM])
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
    except InvalidKeyIdError:
        raise
    except (JoseError, ValueError):
        return None
    return dict(decoded.claims)


class Signer:
    """Signs and verifies this server's access tokens."""

    def __init__(self, key: ECKey) -> None:
        self._key = key
        self.kid = str(key.kid)
        self._public = KeySet([public_half(key)])

    @classmethod
    def in_dir(cls, data_dir: Path) -> Signer:
        raw = read_or_create(data_dir / SIGNING_KEY_FILE, _new_key)
        return cls(ECKey.import_key(json.loads(raw)))

    def jwks(self) -> dict[str, Any]:
        """The public half only (RFC 7517)."""
        return dict(self._public.as_dict(private=False))

    def sign(self, claims: dict[str, Any]) -> str:
        return sign_with(self._key, claims)

    def verify(
        self, token: str, *, issuer: str, audience: str, now: Callable[[], int]
    ) -> dict[str, Any] | None:
        """The claims of a token this server signed for ``audience``, still valid at ``now()``;
        None for anything else (bad signature, other issuer or audience, expired, malformed)."""
        try:
            return verify_with(self._public, token, issuer=issuer, audience=audience, now=now)
        except InvalidKeyIdError:
            return None
