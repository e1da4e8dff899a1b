"""What one statement per ingest saves on PostgreSQL: a request of 500 messages stored row by
row (the shared ingest, a round trip per row) beside the same request as one statement.

    python bench/pg_ingest.py --database-url postgresql://… [--rows 500] [--requests 20]

In-process (the store a server runs, without HTTP), on a fresh database, alternating the two
request by request; each request has new texts. Prints per request the median wall time and
the CPU of this process (the database's own CPU is not in it; on one machine it is in the
wall time).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, table
from bench.vault import postgres_database
from mcp_memoryrouter.vault.rules.domain import NewRaw
from mcp_memoryrouter.vault.store.base import Store

Ingest = Callable[[str, Sequence[NewRaw], str | None], object]


def request(rows: int, n: int) -> list[NewRaw]:
    return [
        NewRaw(
            id=str(uuid.uuid4()),
            role="user",
            content=f"request {n} message {i}: the user talked about the garden and the bike",
            tokens=20,
            date_ms=1_767_225_600_000 + (n * rows + i) * 1000,
            session_id="bench",
            dedup=f"bench-{n}-{i}",
            created_ms=1_767_225_600_000,
        )
        for i in range(rows)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    from mcp_memoryrouter.vault.store.postgres import PostgresStore

    with postgres_database(args.database_url, args.rows) as url:
        store = PostgresStore(url, pool_min=1, pool_max=2)
        try:
            store.create_vault("bench", "vr_bench", 0)
            ways: dict[str, Ingest] = {
                "row by row (shared ingest)": lambda v, r, m: Store.ingest(store, v, r, m),
                "one statement": store.ingest,
            }
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
            n = 0
            for _ in range(args.requests + 2):
                for name, ingest in ways.items():
                    rows = request(args.rows, n)
                    n += 1
                    wall, cpu = time.perf_counter(), time.process_time()
                    ingest("bench", rows, "local")
                    times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        finally:
            store.close()
    print(f"code {code_version()}, {args.requests} requests of {args.rows} messages each way")
    rows_out = []
    for name, measured in times.items():
        kept = measured[2:]  # the first two warm the pool and the plans
        wall = statistics.median(w for w, _ in kept) * 1000
        cpu = statistics.median(c for _, c in kept) * 1000
        rows_out.append([name, f"{wall:.1f}", f"{cpu:.1f}"])
    print(table(["ingest of one request", "wall ms (p50)", "CPU ms (p50)"], rows_out))


if __name__ == "__main__":
    main()
