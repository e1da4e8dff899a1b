"""The cost of the MCP layer: the same search through /mcp and through the REST API.

    python bench/mcp_overhead.py [--memories 5000] [--samples 200]

One real ``mcp-memoryrouter serve`` process; the REST side is an HTTP client with keep-alive,
the MCP side is the SDK's own client (spec 2026-07-28, Streamable HTTP). Prints p50/p95 of
each and the ratio of the p50s (goal <= 1.3).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import p50, p95, server, table

QUERY = {"query": "postgres deploy review", "limit": 10}
WORDS = [
    "deploy",
    "auth",
    "postgres",
    "lease",
    "budget",
    "review",
    "design",
    "memory",
    "index",
    "session",
    "customer",
    "invoice",
    "meeting",
    "roadmap",
    "release",
    "schema",
    "billing",
]


def sentence(i: int) -> str:
    picks = [WORDS[(i * k + k) % len(WORDS)] for k in range(1, 7)]
    return f"Note {i}: talked about {' '.join(picks)} with the team."


async def measure(url: str, key: str, samples: int) -> dict[str, list[float]]:
    headers = {"Authorization": f"Bearer {key}"}
    out: dict[str, list[float]] = {"REST search": [], "MCP search_memories": []}
    async with httpx2.AsyncClient(base_url=url, headers=headers, timeout=30) as rest:
        for _ in range(20):
            await rest.post("/v1/memory/search", json=QUERY)
        for _ in range(samples):
            start = time.perf_counter()
            response = await rest.post("/v1/memory/search", json=QUERY)
            response.raise_for_status()
            out["REST search"].append((time.perf_counter() - start) * 1000)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url + "/mcp", http_client=http)) as client,
    ):
        for _ in range(20):
            await client.call_tool("search_memories", QUERY)
        for _ in range(samples):
            start = time.perf_counter()
            result = await client.call_tool("search_memories", QUERY)
            assert not result.is_error
            out["MCP search_memories"].append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        created = subprocess.run(
            [sys.executable, "-m", "mcp_memoryrouter", "keys", "create", "--json"],
            env={"MEMORYROUTER_DATA_DIR": tmp, "PATH": ""},
            capture_output=True,
            check=True,
            text=True,
        )
        key = json.loads(created.stdout)["key"]
        with server(Path(tmp)) as url:
            with httpx2.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as http:
                for start in range(0, args.memories, 500):
                    messages = [
                        {"content": sentence(i), "date": "2026-02-01"}
                        for i in range(start, min(args.memories, start + 500))
                    ]
                    http.post("/v1/memory/ingest", json={"messages": messages}).raise_for_status()
                while http.get("/v1/memory/stats").json()["pending_embeddings"]:
                    time.sleep(1)  # measure once the background embedding has finished
            runs = anyio.run(measure, url, key, args.samples)
    rest, mcp = runs["REST search"], runs["MCP search_memories"]
    rows = [[name, f"{p50(v):.2f}", f"{p95(v):.2f}"] for name, v in runs.items()]
    print(table(["path", "p50 ms", "p95 ms"], rows))
    print(f"MCP / REST p50 ratio: {p50(mcp) / p50(rest):.2f} (goal <= 1.3)")


if __name__ == "__main__":
    main()
