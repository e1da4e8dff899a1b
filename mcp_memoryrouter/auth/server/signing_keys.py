"""The signing keys replicas share in PostgreSQL (table ``oauth_signing_keys``), rotated.

A key signs for ``signing_seconds`` after it was made; then the first replica that needs to
sign makes the next one, under a transaction-scoped advisory lock and after looking again, so
replicas racing make one key. A key is published in the JWKS, and accepted, until every token
it may have signed has expired: ``signing_seconds + access_seconds`` after it was made. Older
keys are deleted when a new one is made.

Each replica keeps the set in memory and reads it again every
:data:`~mcp_memoryrouter.limits.OAUTH_KEYS_RELOAD_SECONDS`, when its own current key has
stopped signing, and when a token names a key it does not know (at most once per
:data:`~mcp_memoryrouter.limits.OAUTH_UNKNOWN_KID_RELOAD_SECONDS`, so made-up ``kid`` values
cost no more than one small query a second).

The private keys are stored sealed with the sealing key (``auth/state/sealing.py``), which is not in
the database: whoever can read the database can neither forge access tokens nor open the
memory keys grants are bound to; that takes the sealing key file as well. A replica whose
sealing key cannot open the current signing key refuses to start (its sealing key differs
from the other replicas').
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from joserfc.errors import InvalidKeyIdError
from joserfc.jwk import ECKey, KeySet

from mcp_memoryrouter import limits
from mcp_memoryrouter.auth.server.signing import new_key, public_half, sign_with, verify_with
from mcp_memoryrouter.auth.state.database import AUTH_MIGRATIONS, Database, PostgresPool
from mcp_memoryrouter.auth.state.sealing import Sealer
from mcp_memoryrouter.errors import ConfigError

log = logging.getLogger(__name__)

DIFFERENT_SEALING_KEY = (
    "the shared OAuth signing key is sealed with another sealing key: give every replica the "
    "same one (MEMORYROUTER_SEALING_KEY_FILE or MEMORYROUTER_SEALING_KEY)"
)
# pg_advisory_xact_lock key for making a key: "MRSIGN"
_ROTATION_LOCK = 0x4D525349474E


@dataclass(frozen=True)
class _Key:
    key: ECKey
    created_at: float


class SigningKeys:
    """Signs with the newest key, verifies with every published one, by ``kid``."""

    def __init__(
        self,
        db: Database,
        sealer: Sealer,
        *,
        signing_seconds: float,
        access_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._db = db
        self._sealer = sealer
        self._signing = signing_seconds
        self._published = signing_seconds + access_seconds
        self._clock = clock
        self._keys: list[_Key] = []
        self._public = KeySet([])
        self._loaded_at = -math.inf
        self._unknown_at = -math.inf
        newest = self._db.one(
            "SELECT sealed_jwk FROM oauth_signing_keys ORDER BY created_at DESC LIMIT 1"
        )
        if newest is not None and self._sealer.unseal(newest["sealed_jwk"]) is None:
            raise ConfigError(DIFFERENT_SEALING_KEY)
        self._load(clock())

    @classmethod
    def postgres(
        cls,
        pool: PostgresPool,
        sealer: Sealer,
        *,
        signing_seconds: float,
        access_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> SigningKeys:
        return cls(
            pool.database(AUTH_MIGRATIONS),  # the table is one of the authorization server's
            sealer,
            signing_seconds=signing_seconds,
            access_seconds=access_seconds,
            clock=clock,
        )

    @property
    def kid(self) -> str:
        """The key signing now."""
        return str(self._current(self._clock()).key.kid)

    def jwks(self) -> dict[str, Any]:
        """The public halves of every key whose tokens may still be valid (RFC 7517)."""
        self._fresh(self._clock())
        return dict(self._public.as_dict(private=False))

    def sign(self, claims: dict[str, Any]) -> str:
        return sign_with(self._current(self._clock()).key, claims)

    def verify(
        self, token: str, *, issuer: str, audience: str, now: Callable[[], int]
    ) -> dict[str, Any] | None:
        at = self._clock()
        self._fresh(at)
        try:
            return verify_with(self._public, token, issuer=issuer, audience=audience, now=now)
        except InvalidKeyIdError:
            if at - self._unknown_at < limits.OAUTH_UNKNOWN_KID_RELOAD_SECONDS:
                return None
            self._unknown_at = at
            self._load(at)  # another replica may have made it since we last looked
        try:
            return verify_with(self._public, token, issuer=issuer, audience=audience, now=now)
        except InvalidKeyIdError:
            return None

    # -------------------------------------------------------------------------------------

    def _fresh(self, now: float) -> None:
        if not 0 <= now - self._loaded_at < limits.OAUTH_KEYS_RELOAD_SECONDS:
            self._load(now)

    def _current(self, now: float) -> _Key:
        self._fresh(now)
        signing = [k for k in self._keys if k.created_at > now - self._signing]
        if not signing:
            self._load(now)
            signing = [k for k in self._keys if k.created_at > now - self._signing]
        if not signing:  # the key another replica made does not open with ours
            raise ConfigError(DIFFERENT_SEALING_KEY)
        return signing[-1]

    def _load(self, now: float) -> None:
        """Read the published keys; make the next one first when none signs any more."""
        keys = self._read(now)
        if not any(k.created_at > now - self._signing for k in keys):
            self._rotate(now)
            keys = self._read(now)
        self._keys = keys
        self._public = KeySet([public_half(k.key) for k in keys])
        self._loaded_at = now

    def _read(self, now: float) -> list[_Key]:
        rows = self._db.all(
            "SELECT kid, sealed_jwk, created_at FROM oauth_signing_keys WHERE created_at > ? "
            "ORDER BY created_at",
            now - self._published,
        )
        keys = []
        for row in rows:
            raw = self._sealer.unseal(row["sealed_jwk"])
            if raw is None:
                log.warning("signing key %s is sealed with another sealing key", row["kid"])
                continue
            keys.append(_Key(ECKey.import_key(json.loads(raw)), float(row["created_at"])))
        return keys

    def _rotate(self, now: float) -> None:
        with self._db.atomic() as tx:
            tx.lock(_ROTATION_LOCK)
            if tx.one(
                "SELECT kid FROM oauth_signing_keys WHERE created_at > ? LIMIT 1",
                now - self._signing,
            ):
                return  # another replica made it while we waited
            key = new_key()
            sealed = self._sealer.seal(json.dumps(key.as_dict(private=True)))
            tx.run("INSERT INTO oauth_signing_keys VALUES (?, ?, ?)", str(key.kid), sealed, now)
            tx.run("DELETE FROM oauth_signing_keys WHERE created_at <= ?", now - self._published)
