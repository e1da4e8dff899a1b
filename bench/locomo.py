"""Retrieval quality on LoCoMo-10, through the public HTTP API.

    python bench/locomo.py ../shared/bench-data/locomo/locomo10.json [--embeddings local]
        [--reflections observations] [--sessions] [--as-of] [--database-url postgresql://…]

The protocol of ``bench-data/README.md``: each conversation is one vault, each turn one raw
memory ("<speaker>: <text>", dated with its session's date), ingested as a user would. Every
question of categories 1-4 with at least one valid evidence id is searched (limit 50) and
the ranked turns are scored: turn R@{1,5,10,20,50}, nDCG@10, MRR, Hit@1, and session
R@{1,3,5,10} (sessions ranked by their best turn); per category, and again with the
audit-corrected evidence (``locomo_audit_errors.json`` beside the data, when present).
The data set is CC BY-NC 4.0 (Maharana et al., ACL 2024): measurement only, never shipped.

``--reflections observations`` consolidates every vault before searching, through the public
checkout/commit loop (1,000-token batches, oldest first): the data set's own model-written
``observation`` facts stand in for the client's model, each committed with the batch that
holds its first evidence turn (a batch with none gets one low-importance line). Search then
runs over all tiers; the ranked turns are the raw hits in order, followed by the sources of
the reflection hits (``inspect``) in the reflections' rank order, deduplicated.

``--rankers fusion,learned`` asks the same vaults once with each ranker
(``MEMORYROUTER_RANKER``) and prints both; ``--conversations 5-9`` reports those
conversations apart as well (the shipped learned ranker was trained on conversations 0-4:
``bench/train_ranker.py``).

``--sessions`` ingests each LoCoMo session under its own session id (as a host that sends one
would), so a page is spread over sessions; ``--as-of`` asks every question as of the date of
its conversation's last session, so a time the question names ("last week") counts from then.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import server, table
from bench.vault import postgres_database

TURN_KS = (1, 5, 10, 20, 50)
SESSION_KS = (1, 3, 5, 10)


@dataclass
class Question:
    conv: int
    index: int
    text: str
    category: int
    gold: set[str]


def session_date(text: str) -> str:
    """``1:56 pm on 8 May, 2023`` -> ISO datetime (UTC)."""
    moment = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return moment.strftime("%Y-%m-%dT%H:%M:00Z")


def turns_of(conversation: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(dia_id, text, date) of every turn."""
    out = []
    for key, value in conversation.items():
        if not re.fullmatch(r"session_\d+", key) or not isinstance(value, list):
            continue
        date = session_date(conversation[f"{key}_date_time"])
        for turn in value:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares image: {turn['blip_caption']}]"
            out.append((turn["dia_id"], text, date))
    return out


def evidence_ids(raw: list[str]) -> set[str]:
    return {part for item in raw for part in re.split(r"[;,\s]+", item) if part}


def create_key(data_dir: Path, store_env: dict[str, str]) -> str:
    created = subprocess.run(
        [sys.executable, "-m", "mcp_memoryrouter", "keys", "create", "--json"],
        env={"MEMORYROUTER_DATA_DIR": str(data_dir), "PATH": "", **store_env},
        capture_output=True,
        check=True,
        text=True,
    )
    key: str = json.loads(created.stdout)["key"]
    return key


def ingest(
    http: httpx2.Client, key: str, turns: list[tuple[str, str, str]], sessions: bool = False
) -> dict[str, str]:
    """Ingest every turn (each LoCoMo session under its own session id with ``sessions``);
    map memory id -> dia_id."""
    by_id: dict[str, str] = {}
    headers = {"Authorization": f"Bearer {key}"}
    groups: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for turn in turns:
        groups[turn[0].split(":")[0] if sessions else ""].append(turn)
    for session, told in groups.items():
        for start in range(0, len(told), 200):
            chunk = told[start : start + 200]
            messages = [{"role": "user", "content": t, "date": d} for _, t, d in chunk]
            body: dict[str, Any] = {"messages": messages}
            if session:
                body["session_id"] = session
            response = http.post("/v1/memory/ingest", json=body, headers=headers)
            response.raise_for_status()
            ids = response.json()["ids"]
            assert len(ids) == len(chunk), "a turn was split into several memories"
            for memory_id, (dia, _, _) in zip(ids, chunk, strict=True):
                by_id.setdefault(memory_id, dia)
    return by_id


def observations_by_turn(sample: dict[str, Any]) -> dict[str, list[str]]:
    """The data set's model-written facts, keyed by their first evidence turn."""
    facts: dict[str, list[str]] = defaultdict(list)
    for per_speaker in sample.get("observation", {}).values():
        for items in per_speaker.values():
            for text, evidence in items:
                turns = sorted(evidence_ids([evidence] if isinstance(evidence, str) else evidence))
                if turns:
                    facts[turns[0]].append(text)
    return facts


def consolidate(http: httpx2.Client, key: str, by_id: dict[str, str], sample: Any) -> int:
    """Run the checkout/commit loop to the end with the data set's facts as the model's answer."""
    headers = {"Authorization": f"Bearer {key}"}
    facts = observations_by_turn(sample)
    batches = 0
    while True:
        batch = http.post(
            "/v1/memory/consolidate/checkout",
            json={"tier": 1, "max_tokens": 1000},
            headers=headers,
        )
        batch.raise_for_status()
        body = batch.json()
        if body["batch_id"] is None:
            return batches
        texts = [t for source in body["source_ids"] for t in facts.pop(by_id[source], [])]
        entries = [{"text": t, "importance": 5} for t in texts[:100]] or [
            {"text": "Small talk with nothing lasting to note.", "importance": 1}
        ]
        done = http.post(
            "/v1/memory/consolidate/commit",
            json={"batch_id": body["batch_id"], "entries": entries},
            headers=headers,
        )
        done.raise_for_status()
        batches += 1


def sources_of(
    http: httpx2.Client, key: str, memory_id: str, cache: dict[str, list[str]]
) -> list[str]:
    if memory_id not in cache:
        found = http.post(
            "/v1/memory/inspect",
            json={"memory_id": memory_id},
            headers={"Authorization": f"Bearer {key}"},
        )
        found.raise_for_status()
        cache[memory_id] = [source["id"] for source in found.json()["sources"]]
    return cache[memory_id]


def ranked_turns(
    http: httpx2.Client,
    key: str,
    rows: list[dict[str, Any]],
    by_id: dict[str, str],
    inspected: dict[str, list[str]],
) -> list[str]:
    """The turns a page ranks: its raw hits in order, then the reflections' sources."""
    ids = [row["id"] for row in rows if row["tier"] == 1]
    for row in rows:
        if row["tier"] > 1:
            ids.extend(sources_of(http, key, row["id"], inspected))
    ranked: list[str] = []
    for memory_id in ids:
        dia = by_id.get(memory_id)
        if dia is not None and dia not in ranked:
            ranked.append(dia)
    return ranked


def wait_indexed(http: httpx2.Client, keys: list[str]) -> float:
    start = time.perf_counter()
    while True:
        pending = sum(
            http.get("/v1/memory/stats", headers={"Authorization": f"Bearer {k}"}).json()[
                "pending_embeddings"
            ]
            for k in keys
        )
        if pending == 0:
            return time.perf_counter() - start
        print(f"  {pending} memories waiting for vectors", file=sys.stderr)
        time.sleep(5)


def score(ranked: list[str], gold: set[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in TURN_KS:
        out[f"turn R@{k}"] = len(gold & set(ranked[:k])) / len(gold)
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in gold)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    out["nDCG@10"] = dcg / idcg
    first = next((i for i, d in enumerate(ranked) if d in gold), None)
    out["MRR"] = 0.0 if first is None else 1 / (first + 1)
    out["Hit@1"] = float(bool(ranked) and ranked[0] in gold)
    sessions: list[str] = []
    for dia in ranked:
        session = dia.split(":")[0]
        if session not in sessions:
            sessions.append(session)
    gold_sessions = {d.split(":")[0] for d in gold}
    for k in SESSION_KS:
        out[f"session R@{k}"] = len(gold_sessions & set(sessions[:k])) / len(gold_sessions)
    return out


def report(results: list[tuple[Question, dict[str, float]]], title: str) -> str:
    groups: dict[str, list[dict[str, float]]] = defaultdict(list)
    for question, metrics in results:
        groups[f"cat {question.category}"].append(metrics)
        if question.category <= 4:
            groups["cats 1-4"].append(metrics)
    columns = ["cats 1-4"] + [f"cat {c}" for c in (1, 2, 3, 4, 5) if f"cat {c}" in groups]
    names = list(results[0][1])
    rows = [
        [name] + [f"{100 * sum(m[name] for m in groups[c]) / len(groups[c]):.1f}" for c in columns]
        for name in names
    ]
    rows.append(["n"] + [str(len(groups[c])) for c in columns])
    return f"{title}\n" + table(["metric", *columns], rows)


@contextmanager
def store_for(database_url: str | None) -> Iterator[dict[str, str]]:
    """The server's store settings: the data directory's SQLite, or a fresh PostgreSQL
    database made through ``database_url`` and dropped afterwards."""
    if database_url is None:
        yield {}
        return
    with postgres_database(database_url, 0) as url:
        yield {"MEMORYROUTER_DATABASE_URL": url}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--embeddings", default="local", choices=["local", "none"])
    parser.add_argument("--database-url", help="serve from PostgreSQL (a fresh database)")
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--reflections", default="none", choices=["none", "observations"])
    parser.add_argument(
        "--sessions", action="store_true", help="ingest each session under its own session id"
    )
    parser.add_argument(
        "--as-of", action="store_true", help="ask each question as of its conversation's last day"
    )
    parser.add_argument(
        "--rankers",
        default="learned",
        help="MEMORYROUTER_RANKER of each server, in turn over the same vaults: fusion,learned",
    )
    parser.add_argument(
        "--conversations", help="report these conversations apart too: 5-9 (the ranker's held-out)"
    )
    args = parser.parse_args()
    data = json.loads(args.data.read_text())
    audit_path = args.data.parent / "locomo_audit_errors.json"
    corrected: dict[str, set[str]] = {}
    if audit_path.exists():
        for item in json.loads(audit_path.read_text()):
            if item.get("correct_evidence"):
                corrected[item["question_id"]] = evidence_ids(item["correct_evidence"])
    with tempfile.TemporaryDirectory() as tmp, store_for(args.database_url) as store_env:
        keys = [create_key(Path(tmp), store_env) for _ in data]
        env = {
            "MEMORYROUTER_EMBEDDINGS": args.embeddings,
            "MEMORYROUTER_EMBED_THREADS": "2",
            **store_env,
        }
        with server(Path(tmp), env) as url, httpx2.Client(base_url=url, timeout=120) as http:
            started = time.perf_counter()
            maps = [
                ingest(http, key, turns_of(c["conversation"]), args.sessions)
                for key, c in zip(keys, data, strict=True)
            ]
            ingested = time.perf_counter() - started
            if args.reflections == "observations":
                batches = sum(
                    consolidate(http, key, by_id, sample)
                    for key, by_id, sample in zip(keys, maps, data, strict=True)
                )
                print(f"consolidated in {batches} batches", file=sys.stderr)
            indexed = wait_indexed(http, keys)
            print(f"ingest {ingested:.1f} s, vectors ready {indexed:.1f} s later", file=sys.stderr)
        for ranker in args.rankers.split(","):
            ranked_env = {**env, "MEMORYROUTER_RANKER": ranker}
            with (
                server(Path(tmp), ranked_env) as url,
                httpx2.Client(base_url=url, timeout=120) as http,
            ):
                title = f"LoCoMo-10, embeddings={args.embeddings}, reflections={args.reflections}"
                title += ", sessions" * args.sessions + ", as_of" * args.as_of
                title += f", ranker={ranker}"
                ask_all(http, args, data, keys, maps, corrected, title)


def ask_all(
    http: httpx2.Client,
    args: argparse.Namespace,
    data: list[Any],
    keys: list[str],
    maps: list[dict[str, str]],
    corrected: dict[str, set[str]],
    title: str,
) -> None:
    """Ask every question and print the tables (again for ``--conversations`` alone)."""
    results: list[tuple[Question, dict[str, float]]] = []
    audited: list[tuple[Question, dict[str, float]]] = []
    latencies = []
    inspected: dict[str, list[str]] = {}
    for conv, (key, sample, by_id) in enumerate(zip(keys, data, maps, strict=True)):
        valid = set(by_id.values())
        asked = max(d for _, _, d in turns_of(sample["conversation"]))
        for index, qa in enumerate(sample["qa"]):
            gold = evidence_ids(qa.get("evidence", [])) & valid
            if not gold:
                continue
            q = Question(conv, index, qa["question"], int(qa["category"]), gold)
            t0 = time.perf_counter()
            body: dict[str, Any] = {"query": q.text, "limit": args.limit}
            if args.as_of:
                body["as_of"] = asked
            response = http.post(
                "/v1/memory/search", json=body, headers={"Authorization": f"Bearer {key}"}
            )
            latencies.append((time.perf_counter() - t0) * 1000)
            response.raise_for_status()
            ranked = ranked_turns(http, key, response.json()["memories"], by_id, inspected)
            results.append((q, score(ranked, gold)))
            fixed = corrected.get(f"locomo_{conv}_qa{index}")
            fixed_gold = (fixed & valid) if fixed else gold
            audited.append((q, score(ranked, fixed_gold or gold)))
    latencies.sort()
    print(report(results, f"{title}, original evidence"))
    print()
    print(report(audited, "audit-corrected evidence"))
    if args.conversations:
        chosen = conversations(args.conversations, len(data))
        apart = [(q, m) for q, m in results if q.conv in chosen]
        print()
        print(report(apart, f"{title}, conversations {args.conversations}, original evidence"))
    print(
        f"\nsearch latency p50 {latencies[len(latencies) // 2]:.1f} ms over "
        f"{len(latencies)} queries\n"
    )


def conversations(spec: str | None, count: int) -> set[int]:
    """``"5-9"`` or ``"0,3"`` -> those conversation indexes (all of them without a spec)."""
    if not spec:
        return set(range(count))
    chosen: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        chosen.update(range(int(low), int(high or low) + 1))
    return chosen


if __name__ == "__main__":
    main()
