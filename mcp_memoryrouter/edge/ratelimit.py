"""A token bucket per caller: the rate-limit rule the REST API and the authorization server
share.

Each caller owns a bucket of ``burst`` tokens that refills at ``per_minute`` tokens a minute;
a request takes one token, and a request finding the bucket empty is told the seconds until a
token is back (what ``Retry-After``, RFC 9110 §10.2.3 and RFC 6585 §4, is made of). The clock
is injected: milliseconds, monotonic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

MonotonicMs = Callable[[], int]
MAX_BUCKETS = 10_000  # past this many callers, buckets that are full again are forgotten


@dataclass
class _Bucket:
    tokens: float
    at_ms: int


class TokenBuckets:
    """``take(caller)`` spends one token, answering None, or the seconds to wait."""

    blocking = False  # in memory: take on the event loop

    def __init__(
        self, per_minute: int, burst: int, clock: MonotonicMs, *, max_buckets: int = MAX_BUCKETS
    ) -> None:
        if per_minute < 1 or burst < 1:
            raise ValueError("per_minute and burst must be at least 1")
        self.per_minute = per_minute
        self.burst = burst
        self._max_buckets = max_buckets
        self._per_ms = per_minute / 60_000
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def take(self, caller: str) -> float | None:
        now = self._clock()
        bucket = self._buckets.get(caller)
        if bucket is None:
            self._forget_full(now)
            bucket = self._buckets[caller] = _Bucket(float(self.burst), now)
        elapsed = max(0, now - bucket.at_ms)  # a clock that steps back refills nothing
        bucket.tokens = min(float(self.burst), bucket.tokens + elapsed * self._per_ms)
        bucket.at_ms = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return None
        return (1 - bucket.tokens) / self._per_ms / 1000

    def _forget_full(self, now: int) -> None:
        if len(self._buckets) < self._max_buckets:
            return
        for caller, bucket in list(self._buckets.items()):
            if bucket.tokens + (now - bucket.at_ms) * self._per_ms >= self.burst:
                del self._buckets[caller]
