"""What a shared rate-limit budget costs: one take from the bucket every replica shares (a
statement in PostgreSQL) beside one from the bucket a process keeps in memory.

    python bench/rate_limit.py --database-url postgresql://… [--takes 2000] [--runs 5]

Printed per take, median of ``runs`` runs of ``takes`` takes over 50 callers: wall time and
the CPU of this process (the database's own CPU is not in it; on one machine it is in the
wall time).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, table
from bench.vault import postgres_database
from mcp_memoryrouter.edge.ratelimit import TokenBuckets

CALLERS = 50
PER_MINUTE = 10_000_000  # never refuses: the cost of a take, not of a refusal


def measure(take: Callable[[str], float | None], takes: int, runs: int) -> tuple[float, float]:
    """(wall ms, CPU ms) per take: medians over ``runs``."""
    for i in range(200):
        take(f"key:{i % CALLERS}")
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(takes):
            take(f"key:{i % CALLERS}")
        walls.append((time.perf_counter() - wall) / takes * 1000)
        cpus.append((time.process_time() - cpu) / takes * 1000)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--takes", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from mcp_memoryrouter.vault.store.postgres import PostgresStore

    memory = TokenBuckets(PER_MINUTE, PER_MINUTE, lambda: time.monotonic_ns() // 1_000_000)
    rows: list[tuple[str, float, float]] = [
        ("in memory (one process)", *measure(memory.take, args.takes, args.runs))
    ]
    with postgres_database(args.database_url, 0) as url:
        store = PostgresStore(url, pool_min=1, pool_max=2)
        try:

            def shared(caller: str) -> float | None:
                return store.take_token(caller, PER_MINUTE, PER_MINUTE)

            rows.append(("shared (PostgreSQL)", *measure(shared, args.takes, args.runs)))
        finally:
            store.close()
    print(f"code {code_version()}, {args.runs} runs of {args.takes} takes, {CALLERS} callers")
    print(
        table(
            ["budget", "wall ms per take", "CPU ms per take"],
            [[name, f"{wall:.4f}", f"{cpu:.4f}"] for name, wall, cpu in rows],
        )
    )


if __name__ == "__main__":
    main()
