"""Vault latency at two sizes: ingest, checkout, commit, search and the debt block.

    python bench/vault.py [--sizes 10000,100000] [--samples 40] [--database-url postgresql://…]

Each size gets a fresh data directory (and with ``--database-url``, a fresh PostgreSQL
database created through that URL and dropped afterwards): raw memories are loaded in bulk
in-process, then a real ``mcp-memoryrouter serve`` process answers every timed request over
loopback HTTP.
Prints p50/p95 per operation and the ratio of p50s between the largest and smallest size
(goal: checkout+commit and the debt block independent of vault size, ratio <= 1.5).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import p50, p95, server, table, timed
from mcp_memoryrouter.vault.http import render
from mcp_memoryrouter.vault.rules.access import Access
from mcp_memoryrouter.vault.rules.dates import format_ms
from mcp_memoryrouter.vault.service import IncomingMessage, VaultService
from mcp_memoryrouter.vault.store import Store
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore

Opener = Callable[[], Store]

WORDS = [
    "deploy",
    "auth",
    "postgres",
    "lease",
    "budget",
    "review",
    "design",
    "memory",
    "vector",
    "index",
    "session",
    "customer",
    "invoice",
    "meeting",
    "roadmap",
    "bug",
    "release",
    "schema",
    "billing",
    "search",
]
DAY_MS = 86_400_000
START_MS = 1_735_689_600_000  # 2025-01-01


def sentence(i: int) -> str:
    picks = [WORDS[(i * k + k) % len(WORDS)] for k in range(1, 9)]
    return f"Note {i}: talked about {' '.join(picks)} with the team and agreed next steps."


def load(open_store: Opener, size: int) -> str:
    """Create a vault and bulk-load ``size`` dated raw memories; return its key."""
    store = open_store()
    service = VaultService(store, clock=lambda: time.time_ns() // 1_000_000, lease_seconds=900)
    key, _ = service.create_vault()
    ingest_notes(service, service.authenticate(key), size)
    store.close()
    return key


def ingest_notes(service: VaultService, access: Access, size: int) -> None:
    """``size`` dated notes spread over a year, ingested 1,000 at a time."""
    step = 365 * DAY_MS // size
    for start in range(0, size, 1000):
        batch = [
            IncomingMessage("user", sentence(i), START_MS + i * step)
            for i in range(start, min(size, start + 1000))
        ]
        service.ingest(access, batch, None)


def debt_block_ms(open_store: Opener, key: str, samples: int = 5000) -> list[float]:
    """The debt block as every response builds it: counters read + rendered, in-process."""
    store = open_store()
    service = VaultService(store, clock=lambda: time.time_ns() // 1_000_000, lease_seconds=900)
    access = service.authenticate(key)
    timed(lambda: render.reflection(service.debt(access)), 200)  # warm the page cache
    # The median of ten rounds' medians: one round alone swings with the CPU's state.
    rounds = [
        p50(timed(lambda: render.reflection(service.debt(access)), samples // 10))
        for _ in range(10)
    ]
    store.close()
    return rounds


@contextmanager
def postgres_database(admin_url: str, size: int) -> Iterator[str]:
    """A fresh database on the server ``admin_url`` reaches, dropped afterwards."""
    import psycopg  # the optional postgres extra

    name = f"memoryrouter_bench_{size}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())
        conn.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        yield urlunsplit(urlsplit(admin_url)._replace(path="/" + name))
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


@contextmanager
def store_for(
    tmp: Path, size: int, database_url: str | None
) -> Iterator[tuple[Opener, dict[str, str]]]:
    """How to open the benchmarked store in-process, and the server's environment for it."""
    if database_url is None:
        yield (lambda: SQLiteStore(tmp / "vault.sqlite3")), {}
        return
    from mcp_memoryrouter.vault.store.postgres import PostgresStore

    with postgres_database(database_url, size) as url:
        yield (
            (lambda: PostgresStore(url, pool_min=0, pool_max=2)),
            {"MEMORYROUTER_DATABASE_URL": url},
        )


def measure(size: int, samples: int, database_url: str | None) -> dict[str, list[float]]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        store_for(Path(tmp), size, database_url) as (open_store, env),
    ):
        started = time.perf_counter()
        key = load(open_store, size)
        print(
            f"  loaded {size} raw memories in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        results: dict[str, list[float]] = {}
        with (
            # The vault's own operations: lexical search, no background embedding competing
            # for the CPU (bench/search.py measures hybrid search).
            server(Path(tmp), {**env, "MEMORYROUTER_EMBEDDINGS": "none"}) as url,
            httpx2.Client(
                base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60
            ) as http,
        ):
            counter = iter(range(10**9))

            def ingest() -> None:
                n = next(counter)
                messages = [
                    {
                        "content": sentence(n * 10 + j) + " fresh",
                        "date": format_ms(START_MS + 400 * DAY_MS + n),
                    }
                    for j in range(10)
                ]
                http.post("/v1/memory/ingest", json={"messages": messages}).raise_for_status()

            results["ingest (10 msgs)"] = timed(ingest, samples)
            batches: list[str] = []

            def checkout() -> None:
                body = http.post(
                    "/v1/memory/consolidate/checkout", json={"tier": 1, "max_tokens": 2000}
                ).json()
                batches.append(body["batch_id"])

            results["checkout (2k tokens)"] = timed(checkout, samples)
            pending = iter(batches)
            entries = [
                {"text": f"Reflection {i} on the period.", "importance": 6} for i in range(6)
            ]

            def commit() -> None:
                http.post(
                    "/v1/memory/consolidate/commit",
                    json={"batch_id": next(pending), "entries": entries},
                ).raise_for_status()

            results["commit (6 entries)"] = timed(commit, samples)
            results["search (lexical)"] = timed(
                lambda: http.post(
                    "/v1/memory/search", json={"query": "postgres deploy review", "limit": 10}
                ),
                samples,
            )
            results["stats + debt (HTTP)"] = timed(lambda: http.get("/v1/memory/stats"), samples)
        results["debt block (in-process, µs)"] = debt_block_ms(open_store, key)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument(
        "--database-url",
        default=None,
        help="benchmark PostgreSQL: a URL whose role may create databases (default: SQLite)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = {}
    for size in sizes:
        print(f"size {size}:", file=sys.stderr)
        runs[size] = measure(size, args.samples, args.database_url)
    small, large = sizes[0], sizes[-1]
    headers = (
        ["operation"]
        + [f"p50/p95 ms @{s // 1000}k" for s in sizes]
        + [f"ratio {large // 1000}k/{small // 1000}k"]
    )
    rows = []
    for op in runs[small]:
        scale = 1000.0 if "µs" in op else 1.0
        cells = [f"{p50(runs[s][op]) * scale:.2f} / {p95(runs[s][op]) * scale:.2f}" for s in sizes]
        ratio = p50(runs[large][op]) / max(p50(runs[small][op]), 1e-9)
        rows.append([op, *cells, f"{ratio:.2f}"])
    print(table(headers, rows))


if __name__ == "__main__":
    main()
