"""Leases: a checkout holds its rows until ``lease_until``; no sweeper ever runs.

A row is free for checkout when it is unconsolidated and either never leased or its lease
has run out (``lease_until <= now``): checkout selects free rows by that condition in SQL
(``store/reflect.py:FREE``), so the database never hands out a row another lease holds. A
commit is accepted only while the lease is still running.
"""

from __future__ import annotations


def lease_until(now_ms: int, lease_seconds: int) -> int:
    return now_ms + lease_seconds * 1000


def lease_running(lease_until_ms: int, now_ms: int) -> bool:
    return now_ms < lease_until_ms
