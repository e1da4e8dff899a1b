"""Per-key rate limiting of the vault's calls: a token bucket for each presented key, taken
from on admission (``front.VaultAPI.admit``), whichever way the call came.

Each caller owns a bucket of ``burst`` tokens that refills at ``per_minute`` tokens a minute;
a request takes one token, and a request finding the bucket empty is answered 429 with
``Retry-After`` (RFC 9110 §10.2.3; RFC 6585 §4) naming the whole seconds until a token is
back. Callers are told apart by the SHA-256 of the key they present (with its mode suffix
stripped, so ``mk_…:read`` shares its key's budget), or by client address when they present
none. Keys are never held in memory in the clear.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from mcp_memoryrouter.edge.ratelimit import MonotonicMs, TokenBuckets
from mcp_memoryrouter.errors import RateLimited
from mcp_memoryrouter.vault.rules.access import hash_key, split_mode

# /healthz: load balancers probe it. /v1/keys/current: how /mcp authenticates a key (on
# every request, so that a revoked key stops at once); throttling it would fail
# authentication itself, not the work. Neither reads a vault, and a key's 256 random bits
# make guessing pointless at any rate.
UNLIMITED_PATHS = frozenset({"/healthz", "/v1/keys/current"})


def caller(key: str | None, address: str | None) -> str:
    """Whose bucket a request takes from: its key's (mode suffix stripped), else its
    address's."""
    if key:
        return "key:" + hash_key(split_mode(key)[0])
    return "addr:" + (address or "unknown")


class RateBuckets(Protocol):
    """Token buckets per caller: in this process (:class:`TokenBuckets`), or in the store
    every replica shares (:class:`SharedBuckets`, ``blocking``: a take is I/O)."""

    per_minute: int
    burst: int
    blocking: bool

    def take(self, caller: str) -> float | None: ...


class SharedBuckets:
    """The budgets in the store (PostgreSQL), so a key gets its budget once whichever
    replica it reaches; each take is one statement there, refilled by the database's clock."""

    blocking = True

    def __init__(
        self, take: Callable[[str, int, int], float | None], per_minute: int, burst: int
    ) -> None:
        if per_minute < 1 or burst < 1:
            raise ValueError("per_minute and burst must be at least 1")
        self._take = take
        self.per_minute = per_minute
        self.burst = burst

    def take(self, caller: str) -> float | None:
        return self._take(caller, self.per_minute, self.burst)


def throttled(buckets: RateBuckets, who: str, wait: float | None) -> RateLimited | None:
    """The 429 when ``who``'s take (``wait``, from ``buckets.take``) found the bucket
    empty."""
    if wait is None:
        return None
    retry_after = max(1, math.ceil(wait))
    return RateLimited(
        f"too many requests: at most {buckets.per_minute} a minute per key "
        f"(bursts of {buckets.burst}); retry after {retry_after} s",
        {"retry_after": retry_after},
    )


__all__ = [
    "MonotonicMs",
    "RateBuckets",
    "SharedBuckets",
    "TokenBuckets",
    "caller",
    "throttled",
]
