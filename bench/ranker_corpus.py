"""The vaults the ranker is trained and measured on, built once and kept on disk.

    python bench/ranker_corpus.py locomo ../shared/bench-data/locomo/locomo10.json /tmp/ranker
    python bench/ranker_corpus.py lifebench /tmp/lifebench_en/users /tmp/ranker
    python bench/ranker_corpus.py stories 6 /tmp/ranker

Each conversation (LoCoMo) or person (LifeBench) is one vault in ``OUT/<set>/data``, ingested
through the HTTP API as a user would (the protocol of ``bench/locomo.py``; a LifeBench item is
one raw memory dated with its ``time``), with every vector computed by the server's worker.
``OUT/<set>/meta.json`` keeps, per vault, its key, which memory holds which evidence id, and
its questions. ``stories`` builds that many histories of ``bench/stories.py`` (seed 11, not
the bench's own 7), each conversation under its session id with its roles; a planted line is
evidence for its conversation, and a question's evidence is its conversations.
``bench/train_ranker.py`` opens the stores in-process from there, so the vaults
are built once however often the ranker is trained. The data sets stay outside the project.
"""

from __future__ import annotations

import argparse
import json
import random
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


STORIES_SEED = 11  # bench/stories.py measures with seed 7: its histories are never trained on
PLAIN_OFFSET = 500  # the plain-worded histories (set ``stories-plain``) are others of seed 11


def build_stories(
    http: httpx2.Client, key: str, history: int, plain: bool = False
) -> dict[str, Any]:
    """One generated history in one vault; its planted lines labelled with their session.
    ``plain``: the questions use their evidence's words (``stories.py --wording plain``), on
    other histories of the same seed."""
    from bench import stories

    rng = random.Random(STORIES_SEED * 1000 + history + (PLAIN_OFFSET if plain else 0))
    convs, questions = stories.generate(rng, 50, plain)
    planted = set(stories.PLANTED)
    by_memory: dict[str, list[str]] = {}
    for conv in convs:
        messages = [
            {"role": t.role, "content": t.text, "date": t.date.isoformat()} for t in conv.turns
        ]
        response = http.post(
            "/v1/memory/ingest",
            json={"messages": messages, "session_id": conv.session},
            headers={"Authorization": f"Bearer {key}"},
        )
        response.raise_for_status()
        ids = response.json()["ids"]
        short = conv.turns if len(ids) == len(conv.turns) else conv.turns[:-1]  # a long last answer
        for memory_id, turn in zip(ids, short, strict=False):
            if turn.text in planted:
                by_memory[memory_id] = [conv.session]
    asked = [
        {
            "id": f"h{history}/{n}",
            "question": q.text,
            "type": q.kind,
            "ask_time": q.as_of.isoformat(),
            "evidence": q.evidence,
        }
        for n, q in enumerate(questions)
    ]
    return {
        "name": f"{'p' if plain else 'h'}{history}",
        "key": key,
        "memories": by_memory,
        "questions": asked,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", choices=["locomo", "lifebench", "stories", "stories-plain"])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    data_dir = args.out / args.set / "data"
    data_dir.mkdir(parents=True, exist_ok=False)
    meta: list[dict[str, Any]] = []
    env = {"MEMORYROUTER_EMBEDDINGS": "local", "MEMORYROUTER_EMBED_THREADS": "2"}
    if args.set.startswith("stories"):
        plain = args.set == "stories-plain"
        keys = [create_key(data_dir, {}) for _ in range(int(str(args.source)))]
        with server(data_dir, env) as url, httpx2.Client(base_url=url, timeout=300) as http:
            meta = [build_stories(http, key, h, plain) for h, key in enumerate(keys)]
            wait_indexed(http, keys)
        (args.out / args.set / "meta.json").write_text(json.dumps(meta))
        return
    vaults = locomo_vaults(args.source) if args.set == "locomo" else lifebench_vaults(args.source)
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
            # kept after each vault: a build stopped half-way still has what it ingested
            (args.out / args.set / "meta.json").write_text(json.dumps(meta))
        wait_indexed(http, keys)
    (args.out / args.set / "meta.json").write_text(json.dumps(meta))


if __name__ == "__main__":
    main()
