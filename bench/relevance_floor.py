"""Calibrate the local model's relevance floor (``LocalMiniLM.relevance_floor``) on LifeBench.

    tar -xJf ../shared/bench-data/lifebench/lifebench_en.tar.xz -C /tmp
    python bench/relevance_floor.py /tmp/lifebench_en/users/lumingqiang.json \
        /tmp/lifebench_en/users/leimingxuan.json

LifeBench (Apache-2.0, Cheng et al., arXiv 2603.03781) is the calibration set; LoCoMo is only
ever measured, never tuned on. Each person's phone items are embedded as the server embeds a
memory (its date written out, then its text: ``embedding_text``) with the local model, each
question as a query. For each question the items are ranked by cosine; printed: the cosine of
the evidence items the dense path ranks in its top 10 and top 50 (percentiles: what a floor
would cut of what dense retrieval gets right), the same for the evidence that shares no word
with the question (only the floor can keep it), the best item for a question asked of another
person's items (similar lives: not a question without an answer), the 150th dense candidate
of each question (what min-max fusion scores 0 and would still return), and any item at all
(a sample of pairs: the cosine of unrelated text).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp_memoryrouter.vault.search.embeddings import LocalMiniLM
from mcp_memoryrouter.vault.search.vectors import embedding_text

_WORD = re.compile(r"\w+")
FLOORS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4)
CANDIDATES = 150  # the dense path's candidates per search (vault/hybrid.py)


def _ms(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)


def _words(text: str) -> set[str]:
    return {w[:5] for w in _WORD.findall(text.lower()) if len(w) > 3}  # a crude stem


def _person(model: LocalMiniLM, path: Path) -> tuple[Any, np.ndarray, np.ndarray]:
    data = json.loads(path.read_text(encoding="utf-8"))
    texts = [embedding_text(m["text"], _ms(m["time"]), _ms(m["time"])) for m in data["memories"]]
    items = model.embed(texts)
    queries = model.embed([q["question"] for q in data["questions"]])
    return data, items, queries


def _pct(values: list[float]) -> str:
    if not values:
        return "none"
    cuts = [float(np.percentile(values, p)) for p in (1, 2, 5, 10, 50)]
    below = "  ".join(f"<{f}: {sum(v < f for v in values) / len(values):.1%}" for f in FLOORS)
    return f"n={len(values)} p1/2/5/10/50 " + " ".join(f"{c:.3f}" for c in cuts) + "  " + below


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("users", nargs="+", type=Path)
    args = parser.parse_args()
    model = LocalMiniLM()
    people = [_person(model, path) for path in args.users]
    top10: list[float] = []
    top50: list[float] = []
    unmatched: list[float] = []
    foreign: list[float] = []
    last: list[float] = []  # each question's 150th dense candidate: what fusion ranks last
    pairs: list[float] = []  # every (question, item) pair: the level of unrelated text
    for n, (data, items, queries) in enumerate(people):
        index = {m["id"]: i for i, m in enumerate(data["memories"])}
        for q, vector in zip(data["questions"], queries, strict=True):
            cosines = items @ vector
            order = np.argsort(-cosines)
            last.append(float(cosines[order[min(CANDIDATES, len(order)) - 1]]))
            pairs.extend(float(c) for c in cosines[:: max(1, len(cosines) // 200)])
            rank = {int(i): r for r, i in enumerate(order[:50])}
            asked = _words(q["question"])
            for ev in q["evidence"]:
                i = index.get(ev)
                if i is None or i not in rank:
                    continue
                (top10 if rank[i] < 10 else top50).append(float(cosines[i]))
                if not asked & _words(data["memories"][i]["text"]):
                    unmatched.append(float(cosines[i]))
        other = people[(n + 1) % len(people)]
        if other is not people[n]:
            foreign.extend(float((other[1] @ v).max()) for v in queries)
    print("evidence in dense top 10:      ", _pct(top10))
    print("evidence in dense top 11-50:   ", _pct(top50))
    print("top-50 evidence, no shared word:", _pct(unmatched))
    print("best item, another person's:   ", _pct(foreign))
    print("the 150th dense candidate:     ", _pct(last))
    print("any item (a sample of pairs):  ", _pct(pairs))


if __name__ == "__main__":
    main()
