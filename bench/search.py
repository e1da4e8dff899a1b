"""Search latency at 10k and 100k memories (query embedding included) and ingest throughput.

    python bench/search.py [--sizes 10000,100000] [--samples 100] [--database-url URL]

Search: a real ``mcp-memoryrouter serve`` process with the ``local`` embedder answers
``POST /v1/memory/search`` over loopback; p50/p95 per size and the ratio. Embedding 100k
texts takes ~30 minutes on 2 cores, so the stored vectors are drawn from 2,000 real MiniLM
embeddings of the bench sentences (search cost depends on how many vectors there are, not
on their values); every query is embedded for real. With ``--database-url`` (a database of
its own: the bench empties it) the same sizes run on SQLite and then on PostgreSQL, printed
side by side with their ratio.
Ingest: 2,000 memories through the API with ``none`` and with ``local``: how fast ingest is
acknowledged, and how fast the background worker makes them searchable by meaning.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, p50, p95, server, table, timed
from mcp_memoryrouter.vault.search.embeddings import LocalMiniLM
from mcp_memoryrouter.vault.service import IncomingMessage, VaultService
from mcp_memoryrouter.vault.store.postgres import PostgresStore
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore

SUBJECTS = [
    "the deploy",
    "our budget",
    "the auth service",
    "Maria's trip",
    "the roadmap",
    "the database",
    "a customer call",
    "the design review",
    "my running plan",
    "the invoice",
    "Sam's birthday",
    "the release",
    "the new hire",
    "the kitchen",
]
EVENTS = [
    "was moved to Friday",
    "went over by a week",
    "needs another review",
    "finally shipped",
    "got cancelled",
    "is blocked on legal",
    "was a success",
    "caused an outage",
    "made everyone laugh",
    "is planned for March",
]
QUERIES = [
    "when did the release ship",
    "problems with the database",
    "Maria travel plans",
    "what happened with the budget",
    "customer complaints",
    "birthday celebration",
    "outages this year",
    "design feedback",
    "running schedule",
    "legal blockers",
]
DAY_MS = 86_400_000
START_MS = 1_735_689_600_000


def sentence(i: int) -> str:
    return (
        f"{SUBJECTS[i % len(SUBJECTS)]} {EVENTS[(i // 7) % len(EVENTS)]}, "
        f"note {i} from week {i % 52}."
    )


def open_store(data_dir: Path, database_url: str | None) -> SQLiteStore | PostgresStore:
    if database_url is None:
        return SQLiteStore(data_dir / "vault.sqlite3")
    with psycopg.connect(database_url, autocommit=True) as conn:  # bench only: start empty
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    return PostgresStore(database_url)


def fill(data_dir: Path, size: int, database_url: str | None = None, pool: int = 2000) -> str:
    store = open_store(data_dir, database_url)
    service = VaultService(store, clock=lambda: time.time_ns() // 1_000_000, lease_seconds=900)
    key, _ = service.create_vault()
    access = service.authenticate(key)
    model = LocalMiniLM(threads=2)
    step = 365 * DAY_MS // size
    for start in range(0, size, 2000):
        batch = [
            IncomingMessage("user", sentence(i), START_MS + i * step)
            for i in range(start, min(size, start + 2000))
        ]
        service.ingest(access, batch, None)
    vectors = np.concatenate(
        [model.embed([sentence(i) for i in range(s, s + 64)]) for s in range(0, pool, 64)]
    )
    # bench only: queue every row for the model, then fill from the pool
    if isinstance(store, SQLiteStore):
        store._writer.execute(
            "INSERT INTO embed_queue (seq, model) SELECT seq, ? FROM memories", (model.model_id,)
        )
    else:
        with psycopg.connect(store.url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO embed_queue (seq, model) SELECT seq, %s FROM memories",
                (model.model_id,),
            )
            conn.execute("ANALYZE memories")
    done = 0
    while pending := store.take_embed_batch(model.model_id, 5000):
        rows = np.stack([vectors[(done + n) % len(vectors)] for n in range(len(pending))])
        store.put_vectors(model.model_id, pending, rows)
        done += len(pending)
    if isinstance(store, PostgresStore):
        with psycopg.connect(store.url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")  # what autovacuum does after a bulk load
    store.close()
    return key


def search_latency(size: int, samples: int, database_url: str | None) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        key = fill(Path(tmp), size, database_url)
        print(f"  {size} memories ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        headers = {"Authorization": f"Bearer {key}"}
        database = {"MEMORYROUTER_DATABASE_URL": database_url} if database_url else {}
        with (
            server(Path(tmp), {"MEMORYROUTER_EMBEDDINGS": "local", **database}) as url,
            httpx2.Client(base_url=url, headers=headers, timeout=60) as http,
        ):
            for q in QUERIES:  # warm: model load, vector index load
                http.post("/v1/memory/search", json={"query": q}).raise_for_status()
            counter = iter(range(10**9))

            def one() -> None:
                n = next(counter)
                query = f"{QUERIES[n % len(QUERIES)]} week {n % 52}"
                http.post("/v1/memory/search", json={"query": query, "limit": 10})

            return timed(one, samples)


def ingest_rate(embeddings: str, count: int = 2000) -> tuple[float, float]:
    """(memories acknowledged per second, memories searchable by meaning per second)."""
    with tempfile.TemporaryDirectory() as tmp:
        created = subprocess.run(
            [sys.executable, "-m", "mcp_memoryrouter", "keys", "create", "--json"],
            env={"MEMORYROUTER_DATA_DIR": tmp, "PATH": ""},
            capture_output=True,
            check=True,
            text=True,
        )
        headers = {"Authorization": f"Bearer {json.loads(created.stdout)['key']}"}
        env = {"MEMORYROUTER_EMBEDDINGS": embeddings, "MEMORYROUTER_EMBED_THREADS": "2"}
        with (
            server(Path(tmp), env) as url,
            httpx2.Client(base_url=url, headers=headers, timeout=60) as http,
        ):
            start = time.perf_counter()
            for s in range(0, count, 100):
                messages = [{"content": sentence(i)} for i in range(s, s + 100)]
                http.post("/v1/memory/ingest", json={"messages": messages}).raise_for_status()
            acked = time.perf_counter() - start
            while http.get("/v1/memory/stats").json()["pending_embeddings"]:
                time.sleep(0.5)
            indexed = time.perf_counter() - start
    return count / acked, count / indexed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument(
        "--database-url",
        help="search on PostgreSQL (a database the bench may empty) beside SQLite; skips ingest",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = {size: search_latency(size, args.samples, None) for size in sizes}
    if args.database_url:
        # the same sizes on PostgreSQL, in the same run: the figures side by side
        on_pg = {size: search_latency(size, args.samples, args.database_url) for size in sizes}
        print(
            table(
                ["memories", "SQLite p50 / p95 ms", "PostgreSQL p50 / p95 ms", "p50 ratio"],
                [
                    [
                        f"{size // 1000}k",
                        f"{p50(runs[size]):.1f} / {p95(runs[size]):.1f}",
                        f"{p50(on_pg[size]):.1f} / {p95(on_pg[size]):.1f}",
                        f"{p50(on_pg[size]) / p50(runs[size]):.2f}",
                    ]
                    for size in sizes
                ],
            )
        )
        print(f"code {code_version()}")
        return
    rows = [[f"{size // 1000}k", f"{p50(v):.1f}", f"{p95(v):.1f}"] for size, v in runs.items()]
    print(table(["memories", "search p50 ms", "search p95 ms"], rows))
    print(
        f"p50 ratio {sizes[-1] // 1000}k/{sizes[0] // 1000}k: "
        f"{p50(runs[sizes[-1]]) / p50(runs[sizes[0]]):.2f}"
    )
    if args.database_url:
        return
    rates = {name: ingest_rate(name) for name in ("none", "local")}
    print(
        table(
            ["embeddings", "ingest acknowledged /s", "searchable by meaning /s"],
            [
                [name, f"{a:.0f}", f"{b:.0f}" if name == "local" else "n/a"]
                for name, (a, b) in rates.items()
            ],
        )
    )


if __name__ == "__main__":
    main()
