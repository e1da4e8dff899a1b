"""What contract 2 costs a checkout: the related-reflection search, beside a contract-1 checkout.

    python bench/contract.py [--reflections 400] [--checkouts 20] [--embeddings local]

One vault through the HTTP API: raw memories of generated conversations (``bench/stories.py``'s
small talk with a fact in every third turn), consolidated by contract 1 into about
``--reflections`` tier-2 reflections (one per fact and one per batch), then enough raw memories
for ``2 x --checkouts`` batches of 1,000 tokens. The checkouts alternate, contract 1 then
contract 2, each leasing its own batch (about 65 lines), and the table gives each one's p50 and
p95 time to answer, the related reflections shown, and the contract's size in tokens (what a
model reads more). Measured with the server's default embedding model (the related search
embeds every line of the batch).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, new_vault, p50, p95, server, table
from bench.stories import SMALL_TALK, SPANS, UPDATES
from mcp_memoryrouter.tokens import est_tokens

START = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
CHECKOUT = "/v1/memory/consolidate/checkout"
COMMIT = "/v1/memory/consolidate/commit"


def facts(rng: random.Random) -> list[str]:
    lines = []
    for _, templates, values, _ in SPANS:
        lines += [t.format(v=v) for t in templates for v in values]
    for _, first, later, values, _ in UPDATES:
        lines += [t.format(v=v) for t in (first, later) for v in values]
    rng.shuffle(lines)
    return lines


def ingest(http: httpx2.Client, rng: random.Random, told: list[str], count: int, day: int) -> int:
    """``count`` messages, a fact every third, from ``day`` on; the next day."""
    messages = []
    for n in range(count):
        when = START + timedelta(days=day + n // 30, minutes=n % 30)
        text = f"{rng.choice(told)} (note {n})" if n % 3 == 0 else rng.choice(SMALL_TALK)[1]
        messages.append({"role": "user", "content": text, "date": when.isoformat()})
    for start in range(0, len(messages), 500):
        body = {"messages": messages[start : start + 500]}
        assert http.post("/v1/memory/ingest", json=body).status_code == 202
    return day + count // 30 + 1


def consolidate(http: httpx2.Client, reflections: int) -> None:
    made = 0
    while made < reflections:
        batch = http.post(CHECKOUT, json={"tier": 1, "max_tokens": 1_000}).json()
        if batch["batch_id"] is None:
            return
        entries = [
            {"text": f"On {m['date'][:10]} the user said: {m['text']}", "importance": 6}
            for m in batch["memories"]
            if "(note" in m["text"]
        ][:10] or [{"text": "Routine conversation.", "importance": 2}]
        done = http.post(COMMIT, json={"batch_id": batch["batch_id"], "entries": entries})
        assert done.status_code == 200, done.text
        made += len(entries)


def wait_for_vectors(http: httpx2.Client) -> None:
    while http.get("/v1/memory/stats").json()["pending_embeddings"]:
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reflections", type=int, default=400)
    parser.add_argument("--checkouts", type=int, default=20)
    parser.add_argument("--embeddings", default="local")
    args = parser.parse_args()
    rng = random.Random(7)
    told = facts(rng)
    times: dict[int, list[float]] = {1: [], 2: []}
    shown: dict[int, list[int]] = {1: [], 2: []}
    size: dict[int, list[int]] = {1: [], 2: []}
    env = {"MEMORYROUTER_EMBEDDINGS": args.embeddings}
    with tempfile.TemporaryDirectory() as tmp, server(Path(tmp), env) as base:
        key = new_vault(Path(tmp), "contract")
        http = httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=300)
        day = ingest(http, rng, told, args.reflections * 3, 0)
        wait_for_vectors(http)
        consolidate(http, args.reflections)
        day = ingest(http, rng, told, args.checkouts * 2 * 80, day)
        wait_for_vectors(http)
        tier2 = http.get("/v1/memory/stats").json()["tiers"]["2"]["count"]
        for n in range(2 * args.checkouts):
            version = 1 + n % 2
            start = time.perf_counter()
            batch = http.post(
                CHECKOUT, json={"tier": 1, "max_tokens": 1_000, "contract": version}
            ).json()
            times[version].append((time.perf_counter() - start) * 1000)
            contract = batch["reflection_contract"]
            shown[version].append(len(contract.get("labels") or []))
            size[version].append(est_tokens(contract["instructions"]))
        http.close()
    rows = [
        [
            f"contract {v}",
            f"{p50(times[v]):.1f}",
            f"{p95(times[v]):.1f}",
            f"{sum(shown[v]) / len(shown[v]):.1f}",
            f"{p50([float(s) for s in size[v]]):.0f}",
        ]
        for v in (1, 2)
    ]
    print(
        f"code {code_version()}; {tier2} tier-2 reflections; {args.checkouts} checkouts of "
        f"1,000 tokens each way, alternating; embeddings {args.embeddings}"
    )
    print(table(["checkout", "p50 ms", "p95 ms", "related shown", "instructions tokens p50"], rows))


if __name__ == "__main__":
    main()
