"""``bench/load.py --replicas``: the replicas it starts over one PostgreSQL are each pinned to
a core of their own (in turn, when there are more replicas than cores), and Caddy in front
sends requests to every one of them.

Skipped where Caddy is missing, unless ``MEMORYROUTER_TEST_CADDY=1`` (CI installs it)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx2
import pytest

from bench.replicas import CADDY, replicas, sealing_key, usable_cores
from tests import pg

pytestmark = pytest.mark.postgres


def health_checks_answered(base: str) -> int:
    """How many ``/healthz`` requests the replica at ``base`` has counted."""
    text = httpx2.get(base + "/metrics", timeout=10).text
    counts = re.findall(r'memoryrouter_http_requests_total\{route="/healthz"[^}]*\} (\d+)', text)
    return sum(int(n) for n in counts)


def test_the_bench_replicas_are_pinned_and_all_reached_through_caddy(
    postgres_databases: pg.Databases, tmp_path: Path
) -> None:
    if not Path(CADDY).exists():
        if os.environ.get("MEMORYROUTER_TEST_CADDY") == "1":
            pytest.fail("MEMORYROUTER_TEST_CADDY=1 but Caddy is not installed")
        pytest.skip("needs Caddy (apt-get install caddy)")
    url = postgres_databases.create()
    env = {
        "MEMORYROUTER_EMBEDDINGS": "none",
        "MEMORYROUTER_METRICS_OPEN": "loopback",
        **sealing_key(),
    }
    try:
        with replicas(url, 3, tmp_path, env, pin=True) as r:
            cores = usable_cores()
            assert [os.sched_getaffinity(pid) for pid in r.pids] == [
                {cores[i % len(cores)]} for i in range(3)
            ]
            before = [health_checks_answered(base) for base in r.bases]
            for _ in range(9):
                assert httpx2.get(r.url + "/healthz", timeout=10).status_code == 200
            after = [health_checks_answered(base) for base in r.bases]
        assert all(a > b for a, b in zip(after, before, strict=True)), (before, after)
    finally:
        postgres_databases.release(url)
