"""The server's reflector: what consolidating 10,000 raw memories costs the server itself.

    python bench/reflector.py [--memories 10000] [--runs 3]

A real ``mcp-memoryrouter serve`` process (SQLite, no embeddings) whose reflector
(``MEMORYROUTER_REFLECTOR_URL``, OpenAI format) is a provider double in this process that
answers at once (``tests/reflector/provider.py``: one entry per ten memory lines, no usage
counts, so the server estimates the tokens as it meters them). Each run fills a fresh vault
with ``--memories`` dated raw memories of ~100 tokens (the reflector turned off meanwhile, so
the writes trigger nothing), turns it on, then asks ``POST /v1/memory/consolidate/run``
(three batches of up to 50,000 tokens each, the loop every consolidator runs) until nothing
is left to consolidate: the raw memories, then the reflections the suggestion names.

Printed, medians over the runs: the wall time, the server's CPU (user + system of the
process, from /proc), the provider calls and the tokens sent and received (``GET /v1/usage``,
``reflector``), per 1,000 raw memories consolidated.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, new_vault, server, table
from bench.load import cpu_seconds, server_pid
from tests.reflector.provider import Provider
from tests.support import live_server

START = datetime(2026, 1, 1, tzinfo=UTC)
BATCH_TOKENS = 50_000


def fill(http: httpx2.Client, count: int) -> None:
    for start in range(0, count, 1000):
        messages = [
            {
                "role": "user" if i % 2 else "assistant",
                "content": f"moment {i:05d}: "
                + " ".join(f"word{(i * 7 + j) % 997}" for j in range(48)),
                "date": (START + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
            for i in range(start, min(count, start + 1000))
        ]
        answer = http.post("/v1/memory/ingest", json={"messages": messages})
        answer.raise_for_status()


def consolidate(http: httpx2.Client) -> tuple[int, int, int]:
    """Runs, batches and memories until nothing is left."""
    runs = batches = memories = 0
    while True:
        done = http.post("/v1/memory/consolidate/run", json={"max_tokens": BATCH_TOKENS})
        done.raise_for_status()
        answer = done.json()
        runs += 1
        batches += answer["batches"]
        memories += answer["memories"]
        if answer["batches"] == 0:
            return runs, batches, memories


def one_run(provider_url: str, memories: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "MEMORYROUTER_EMBEDDINGS": "none",
            "MEMORYROUTER_UI": "off",
            "MEMORYROUTER_PROXY": "off",
            "MEMORYROUTER_REFLECTOR_URL": provider_url,
            "MEMORYROUTER_REFLECTOR_MODEL": "bench-model",
        }
        with server(Path(tmp), env) as url:
            key = new_vault(Path(tmp), "bench")
            headers = {"Authorization": f"Bearer {key}"}
            with httpx2.Client(base_url=url, headers=headers, timeout=600) as http:
                http.post("/v1/memory/consolidate/server", json={"enabled": False})
                fill(http, memories)
                http.post("/v1/memory/consolidate/server", json={"enabled": True})
                pid = server_pid()
                cpu, wall = cpu_seconds(pid), time.perf_counter()
                runs, batches, consolidated = consolidate(http)
                wall, cpu = time.perf_counter() - wall, cpu_seconds(pid) - cpu
                stats = http.get("/v1/memory/stats").json()
                spent: dict[str, Any] = http.get("/v1/usage").json()["reflector"]
    raw_left = stats["reflection"]["unconsolidated"]["raw"]["units"]
    assert raw_left == 0, f"{raw_left} raw memories left"
    per = 1000 / memories
    return {
        "runs": runs,
        "batches": batches,
        "consolidated": consolidated,
        "tier2": stats["tiers"]["2"]["count"],
        "tier3": stats["tiers"]["3"]["count"],
        "wall_s": wall * per,
        "cpu_s": cpu * per,
        "calls": spent["calls"] * per,
        "sent": spent["input_tokens"] * per,
        "received": spent["output_tokens"] * per,
        "wall_total": wall,
        "cpu_total": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    double = Provider(counts=False)
    with live_server(double) as provider_url:
        found = [one_run(provider_url, args.memories) for _ in range(args.runs)]
    median = {k: statistics.median(r[k] for r in found) for k in found[0]}
    print(f"code {code_version()}; {args.memories} raw memories, {args.runs} runs (medians)")
    print(
        f"consolidate/run calls {median['runs']:.0f}, batches {median['batches']:.0f}, "
        f"memories consolidated {median['consolidated']:.0f} (tier 2 made "
        f"{median['tier2']:.0f}, tier 3 {median['tier3']:.0f}); whole run "
        f"{median['wall_total']:.1f} s wall, {median['cpu_total']:.1f} s server CPU"
    )
    print(
        table(
            [
                "per 1,000 raw memories",
                "wall s",
                "server CPU s",
                "provider calls",
                "tokens sent",
                "tokens received",
            ],
            [
                [
                    "consolidated by the server's reflector",
                    f"{median['wall_s']:.2f}",
                    f"{median['cpu_s']:.2f}",
                    f"{median['calls']:.1f}",
                    f"{median['sent']:,.0f}",
                    f"{median['received']:,.0f}",
                ]
            ],
        )
    )


if __name__ == "__main__":
    main()
