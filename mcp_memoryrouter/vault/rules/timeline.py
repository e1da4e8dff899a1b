"""Memories over time: how many a vault holds per day, week or month, by tier.

The store counts the vault's memories per tier and UTC day (:data:`DAY_SQL`, the day number
since 1970-01-01, floored); :func:`fold` gathers those days into buckets. A memory is counted
at ``date_from``, the date the API shows for it: a raw memory's ``date``, a reflection's
``covers.from`` (its ``date`` in inspect). Weeks start on Monday, months on the 1st.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal, get_args

from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.vault.rules.domain import Tier

BucketSize = Literal["day", "week", "month"]
BUCKET_SIZES: tuple[BucketSize, ...] = get_args(BucketSize)
DAY_MS = 86_400_000
_EPOCH = date(1970, 1, 1)
_TIERS: tuple[Tier, ...] = (1, 2, 3)

# The UTC day of a row's date_from, as days since 1970-01-01 rounded down. Integer division
# truncates toward zero in both databases (date_from is an integer: bigint on PostgreSQL), so
# a date before 1970 is first brought down to its day's start by the non-negative remainder.
DAY_SQL = f"(date_from - ((date_from % {DAY_MS}) + {DAY_MS}) % {DAY_MS}) / {DAY_MS}"


@dataclass(frozen=True)
class TimelineBucket:
    start: date  # the bucket's first day (UTC)
    tiers: dict[Tier, int]  # memories per tier, every tier present


@dataclass(frozen=True)
class Timeline:
    vault_ref: str
    size: BucketSize
    buckets: tuple[TimelineBucket, ...]
    last_reflection_ms: int | None = None  # when the newest reflection was made


def bucket_size(text: str) -> BucketSize:
    """The bucket size a request names; anything else is 400 naming ``bucket``."""
    for size in BUCKET_SIZES:
        if text == size:
            return size
    raise InvalidRequest(f"bucket must be one of {', '.join(BUCKET_SIZES)}", {"field": "bucket"})


def bucket_start(day: date, size: BucketSize) -> date:
    """The first day of the bucket holding ``day``."""
    if size == "week":
        return day - timedelta(days=day.weekday())
    if size == "month":
        return day.replace(day=1)
    return day


def fold(days: Iterable[tuple[int, int, int]], size: BucketSize) -> tuple[TimelineBucket, ...]:
    """(day number since 1970-01-01, tier, count) rows, in any order, gathered into the
    non-empty buckets of ``size``, oldest first, each with a count for every tier."""
    counts: dict[date, dict[Tier, int]] = {}
    for day, tier, count in days:
        if count <= 0:
            continue
        start = bucket_start(_EPOCH + timedelta(days=day), size)
        per_tier = counts.setdefault(start, dict.fromkeys(_TIERS, 0))
        if tier in per_tier:  # the schema allows no other
            per_tier[tier] += count
    return tuple(TimelineBucket(start, counts[start]) for start in sorted(counts))
