"""What read-your-writes costs an ingest: a small write is embedded before it is answered.

    python bench/ingest.py [--samples 100]

One real ``mcp-memoryrouter serve`` process (the ``local`` embedder), one key, keep-alive
HTTP. Each sample ingests new, distinct texts and is timed to its 202:

- 1 message with ``embeddings: none`` (no vector: the baseline ack),
- 1 message with the default embedder (embedded before the 202),
- 16 messages with the default embedder (the most that is embedded before the 202),
- 17 messages with the default embedder (queued for the background worker instead).

Prints p50/p95 of each, in the same run, and what embedding before the answer adds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, p50, p95, server, table

TOPICS = ["the release plan", "a customer call", "the database choice", "an invoice", "a trip"]


def message(i: int, j: int) -> dict[str, str]:
    topic = TOPICS[(i + j) % len(TOPICS)]
    return {"role": "user", "content": f"Note {i}.{j}: we talked about {topic} for a while."}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()
    cases: list[tuple[str, int, str | None]] = [
        ("1 message, embeddings none", 1, "none"),
        ("1 message, embedded before the answer", 1, None),
        ("16 messages, embedded before the answer", 16, None),
        ("17 messages, queued", 17, None),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        made = subprocess.run(
            [sys.executable, "-m", "mcp_memoryrouter", "keys", "create", "--json"],
            env={"MEMORYROUTER_DATA_DIR": str(data), "PATH": ""},
            capture_output=True,
            text=True,
            check=True,
        )
        key = json.loads(made.stdout)["key"]
        with (
            server(data) as url,
            httpx2.Client(base_url=url, headers={"X-Memory-Key": key}, timeout=60) as http,
        ):
            times: dict[str, list[float]] = {name: [] for name, _, _ in cases}
            serial = 0
            for round_ in range(args.samples + 5):  # the first 5 rounds warm the model
                for name, count, model in cases:
                    serial += 1
                    body: dict[str, object] = {
                        "messages": [message(serial, j) for j in range(count)]
                    }
                    if model:
                        body["embeddings"] = model
                    response = http.post("/v1/memory/ingest", json=body)
                    response.raise_for_status()
                    if round_ >= 5:
                        times[name].append(response.elapsed.total_seconds() * 1000)
            pending = http.get("/v1/memory/stats").json().get("pending_embeddings")
    base = p50(times[cases[0][0]])
    rows = [
        [name, f"{p50(v):.1f}", f"{p95(v):.1f}", f"{p50(v) - base:+.1f}"]
        for name, v in times.items()
    ]
    print(f"code {code_version()}, {args.samples} samples per case, after 5 warm-up rounds")
    print(table(["ingest", "p50 ms", "p95 ms", "p50 vs no embedding"], rows))
    print(f"pending embeddings when done: {pending} (the 17-message writes, left to the worker)")


if __name__ == "__main__":
    main()
