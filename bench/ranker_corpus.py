"""The vaults the ranker is trained and measured on, built once and kept on disk.

    python bench/ranker_corpus.py locomo ../shared/bench-data/locomo/locomo10.json /tmp/ranker
    python bench/ranker_corpus.py lifebench /tmp/lifebench_en/users /tmp/ranker

Each conversation (LoCoMo) or person (LifeBench) is one vault in ``OUT/<set>/data``, ingested
through the HTTP API as a user would (the protocol of ``bench/locomo.py``; a LifeBench item is
one raw memory dated with its ``time``), with every vector computed by the server's worker.
``OUT/<set>/meta.json`` keeps, per vault, its key, which memory holds which evidence id, and
its questions. ``bench/train_ranker.py`` opens the stores in-process from there, so the vaults
are built once however often the ranker is trained. The data sets stay outside the project.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import server
from bench.locomo import create_key, evidence_ids, turns_of, wait_indexed

LONG_CHARS = 1000  # a text this long may be split into units: sent alone, its ids are its own


def _send(http: httpx2.Client, key: str, items: list[tuple[str, str, str]]) -> list[list[str]]:
    """Ingest (label, text, date) items; the memory ids each one was stored as."""
    response = http.post(
        "/v1/memory/ingest",
        json={"messages": [{"role": "user", "content": t, "date": d} for _, t, d in items]},
        headers={"Authorization": f"Bearer {key}"},
    )
    response.raise_for_status()
    ids: list[str] = response.json()["ids"]
    if len(items) == 1:
        return [ids]
    assert len(ids) == len(items), "a message was split or skipped"
    return [[i] for i in ids]


def ingest_items(
    http: httpx2.Client, key: str, items: list[tuple[str, str, str]]
) -> dict[str, list[str]]:
    """memory id -> the labels of the items it holds (a repeated text is one memory)."""
    first: dict[str, str] = {}
    labels: dict[str, list[str]] = defaultdict(list)
    unique: list[tuple[str, str, str]] = []
    for label, text, date in items:
        if text in first:
            labels[first[text]].append(label)
            continue
        first[text] = label
        labels[label].append(label)
        unique.append((label, text, date))
    by_memory: dict[str, list[str]] = {}
    batch: list[tuple[str, str, str]] = []

    def flush(chunk: list[tuple[str, str, str]]) -> None:
        for (label, _, _), ids in zip(chunk, _send(http, key, chunk), strict=True):
            for memory_id in ids:
                by_memory.setdefault(memory_id, []).extend(labels[label])

    for item in unique:
        if len(item[1]) >= LONG_CHARS:
            flush([item])
            continue
        batch.append(item)
        if len(batch) == 100:
            flush(batch)
            batch = []
    if batch:
        flush(batch)
    return by_memory


def locomo_vaults(path: Path) -> list[dict[str, Any]]:
    vaults = []
    for conv, sample in enumerate(json.loads(path.read_text())):
        turns = turns_of(sample["conversation"])
        asked = max(d for _, _, d in turns)
        questions = [
            {
                "id": f"locomo_{conv}_qa{index}",
                "question": qa["question"],
                "type": str(qa["category"]),
                "ask_time": asked,
                "evidence": sorted(evidence_ids(qa.get("evidence", []))),
            }
            for index, qa in enumerate(sample["qa"])
            if int(qa["category"]) <= 4
        ]
        vaults.append({"name": f"conv{conv}", "items": turns, "questions": questions})
    return vaults


def lifebench_vaults(folder: Path) -> list[dict[str, Any]]:
    vaults = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        items = [(m["id"], m["text"], m["time"]) for m in data["memories"]]
        questions = [
            {k: q[k] for k in ("id", "question", "type", "ask_time", "evidence")}
            for q in data["questions"]
            if q["evidence"]
        ]
        vaults.append({"name": data["user"], "items": items, "questions": questions})
    return vaults


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", choices=["locomo", "lifebench"])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    vaults = locomo_vaults(args.source) if args.set == "locomo" else lifebench_vaults(args.source)
    data_dir = args.out / args.set / "data"
    data_dir.mkdir(parents=True, exist_ok=False)
    meta = []
    env = {"MEMORYROUTER_EMBEDDINGS": "local", "MEMORYROUTER_EMBED_THREADS": "2"}
    keys = [create_key(data_dir, {}) for _ in vaults]
    with server(data_dir, env) as url, httpx2.Client(base_url=url, timeout=300) as http:
        for key, vault in zip(keys, vaults, strict=True):
            by_memory = ingest_items(http, key, vault["items"])
            print(f"{vault['name']}: {len(by_memory)} memories", file=sys.stderr)
            meta.append(
                {
                    "name": vault["name"],
                    "key": key,
                    "memories": by_memory,
                    "questions": vault["questions"],
                }
            )
        wait_indexed(http, keys)
    (args.out / args.set / "meta.json").write_text(json.dumps(meta))


if __name__ == "__main__":
    main()
