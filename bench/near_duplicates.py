"""Where a near-duplicate begins: the cosine threshold of ``limits.NEAR_DUPLICATE_COSINE``,
measured, and what the check costs an ingest.

    python bench/near_duplicates.py [--per-template 40] [--seed 7] [--samples 60]
        [--before DIR] [--skip-cost] [--skip-measure]

Pairs are drawn from the fact templates of the peers benchmark (``bench/peers_templates.py``),
each side embedded as the vault embeds a memory (its date written out, then its text:
``embedding_text``) with the local model, the second told up to 90 days after the first:

- **the same fact in other words** (a paraphrase written per template below, and the
  templates' own second wordings): a near-duplicate, which ``dedupe: near`` should skip;
- **the same fact retold** (other casing and punctuation, a filler word): a near-duplicate;
- **one detail changed** (the same sentence with one slot drawn again: another city, another
  price): a *different* fact, an update the vault must keep;
- **another fact of the same kind** (the same template, every slot drawn again).

Printed: each kind's cosine percentiles, and for each candidate threshold the share of each
kind at or above it, and the share ``dedupe: near`` skips (``rules.near.repeats``). Then the
cost: ``POST /v1/memory/ingest`` through the HTTP API into a vault of 2,000 memories (the
local model), with the check (this checkout: 1 message, with ``dedupe: near``, without
embeddings, 16 messages) and, with ``--before``, without it (the same calls to a server run
from a checkout of the code before the check), interleaved, p50 and p95 of ``--samples``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from random import Random

import httpx2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, new_vault, p50, p95, server, table
from bench.peers_templates import TEMPLATES, Template
from mcp_memoryrouter.vault.rules import near
from mcp_memoryrouter.vault.search.embeddings import LocalMiniLM
from mcp_memoryrouter.vault.search.vectors import embedding_text

THRESHOLDS = (0.80, 0.85, 0.88, 0.90, 0.92, 0.95)
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
# The same fact in other words, one per template (by its first wording), for the pairs.
PARAPHRASES = {
    0: "{first} {last} (my {rel}) has relocated to {city}; the new job is at {company}.",
    1: "{first} {last} took home a {color} {animal} from the animal shelter, called {pet}.",
    2: "My appointment with Dr. {dlast}, the {doctor}, is on {day} at {time}.",
    3: "{first} {last} borrowed {amount} euros from me for the {purpose}, to repay in {month}.",
    4: "I'm getting {first} {last} {gift} from {store} as a birthday present.",
    5: "On {day} morning we fly to {city} on {flight} for the {reason}.",
    6: "To make {first} {last}'s {dish} you need {grams} g of {ingredient} and some {spice}.",
    7: "The old {brand} of {first} {last} is finally sold, for {price} euros.",
    8: "We chose {tech} over {tech2} for the {project} project.",
    9: "Every {day} {first} {last} now has {instrument} lessons with {teacher}.",
    10: "We had a great dinner at {restaurant} in {city}; the {dish} was {price} euros.",
    11: "I'm on chapter {chapter} of '{book}' by {author}.",
    12: "{first} {last} finished the {city} {race} in a time of {time}.",
    13: "{first} {last} moved to apartment {apt} at {num} {street} Street.",
    14: "Our quarterly review with {company} is now on {day} {month} in room {room}.",
}
FILLERS = ("Oh, and ", "By the way, ", "Just so you know: ", "Note: ")


def _slots(template: Template, rng: Random) -> dict[str, str]:
    return {name: draw(rng) for name, draw in template.slots.items()}


def _retold(text: str, rng: Random) -> str:
    filler = rng.choice(FILLERS)
    body = text[0].lower() + text[1:] if rng.random() < 0.5 else text
    return filler + body.rstrip(".") + rng.choice(("", "!", "."))


def pairs(per_template: int, seed: int) -> dict[str, list[tuple[str, str]]]:
    """Text pairs by kind (see the module's docstring)."""
    rng = Random(seed)
    kinds: dict[str, list[tuple[str, str]]] = {
        "same fact, other words": [],
        "same fact, retold": [],
        "one detail changed": [],
        "another fact, same kind": [],
    }
    for number, template in enumerate(TEMPLATES):
        wordings = (*template.says, PARAPHRASES[number])
        for _ in range(per_template):
            slots = _slots(template, rng)
            said = template.says[0].format(**slots)
            other = rng.choice(wordings[1:]).format(**slots)
            kinds["same fact, other words"].append((said, other))
            kinds["same fact, retold"].append((said, _retold(said, rng)))
            changed = dict(slots)
            name = rng.choice(sorted(template.slots))
            for _ in range(20):  # a draw that differs
                changed[name] = template.slots[name](rng)
                if changed[name] != slots[name]:
                    break
            kinds["one detail changed"].append((said, template.says[0].format(**changed)))
            fresh = template.says[0].format(**_slots(template, rng))
            kinds["another fact, same kind"].append((said, fresh))
    return kinds


def repeated(found: list[tuple[str, str]], scores: np.ndarray, threshold: float) -> float:
    """The share of pairs ``dedupe: near`` skips at ``threshold``: similar, and no new detail
    (``rules.near.repeats``, with the threshold of the row)."""
    skipped = [
        score >= threshold and not near.new_details(new, stored)
        for (stored, new), score in zip(found, scores, strict=True)
    ]
    return float(np.mean(skipped))


def cosines(model: LocalMiniLM, found: list[tuple[str, str]], rng: Random) -> np.ndarray:
    firsts, seconds = [], []
    for a, b in found:
        told = START + timedelta(days=rng.randrange(300))
        again = told + timedelta(days=rng.randrange(91))
        at, later = int(told.timestamp() * 1000), int(again.timestamp() * 1000)
        firsts.append(embedding_text(a, at, at))
        seconds.append(embedding_text(b, later, later))
    left, right = model.embed(firsts), model.embed(seconds)
    return np.asarray((left * right).sum(axis=1))


def measure(per_template: int, seed: int) -> None:
    model = LocalMiniLM()
    rng = Random(seed + 1)
    drawn = pairs(per_template, seed)
    by_kind = {kind: cosines(model, found, rng) for kind, found in drawn.items()}
    rows = []
    for kind, scores in by_kind.items():
        p = np.percentile(scores, [1, 5, 50, 95, 99])
        rows.append([kind, str(scores.size), *(f"{v:.3f}" for v in p)])
    print(table(["pairs", "n", "p1", "p5", "p50", "p95", "p99"], rows))
    print()
    rows = [
        [f"{t:.2f}", *(f"{100 * float((s >= t).mean()):.1f} %" for s in by_kind.values())]
        for t in THRESHOLDS
    ]
    print("similar (listed in the answer): cosine at or above the threshold")
    print(table(["at or above", *by_kind], rows))
    print()
    rows = [
        [f"{t:.2f}", *(f"{100 * repeated(drawn[k], s, t):.1f} %" for k, s in by_kind.items())]
        for t in THRESHOLDS
    ]
    print("skipped by dedupe near: similar, and no detail (number, name) the stored one lacks")
    print(table(["at or above", *by_kind], rows))


def cost(samples: int, before: Path | None) -> None:
    """Ingest with and without the near-duplicate check, interleaved: this checkout's
    server beside ``before``'s (a checkout of the code before the check, when given)."""
    servers: dict[str, Path | None] = {"this checkout": None} | (
        {} if before is None else {"before the check": before.resolve()}
    )
    cases: dict[str, dict[str, object]] = {
        "1 message": {},
        "1 message, dedupe near": {"dedupe": "near"},
        "1 message, embeddings none": {"embeddings": "none"},
        "16 messages": {"count": 16},
    }
    with contextlib.ExitStack() as stack:
        clients: dict[str, httpx2.Client] = {}
        for name, root in servers.items():
            data = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            key = new_vault(data, "near-duplicates", cwd=root)
            url = stack.enter_context(server(data, cwd=root))
            http = httpx2.Client(base_url=url, headers={"X-Memory-Key": key}, timeout=120)
            clients[name] = stack.enter_context(http)
            for start in range(0, 2_000, 500):  # a vault of 2,000 memories to compare with
                history = [
                    {"content": f"Note {i}: the meeting about topic {i % 97} went fine."}
                    for i in range(start, start + 500)
                ]
                http.post("/v1/memory/ingest", json={"messages": history}).raise_for_status()
            while http.get("/v1/memory/stats").json()["pending_embeddings"]:
                time.sleep(0.5)
        timings: dict[tuple[str, str], list[float]] = {}
        serial = 0
        for round_ in range(samples + 5):  # the first 5 rounds warm the model
            for case, extra in cases.items():
                for name, http in clients.items():
                    if name != "this checkout" and "dedupe" in extra:
                        continue  # the earlier code ignores the field
                    serial += 1
                    body: dict[str, object] = {
                        "messages": [
                            {"content": f"Write {serial}.{j}: we spoke about item {serial % 13}."}
                            for j in range(int(str(extra.get("count", 1))))
                        ]
                    }
                    body.update({k: v for k, v in extra.items() if k != "count"})
                    response = http.post("/v1/memory/ingest", json=body)
                    response.raise_for_status()
                    if round_ >= 5:
                        elapsed = response.elapsed.total_seconds() * 1000
                        timings.setdefault((case, name), []).append(elapsed)
    rows = [[case, name, f"{p50(t):.1f}", f"{p95(t):.1f}"] for (case, name), t in timings.items()]
    print(f"{samples} samples per case, after 5 warm-up rounds; a vault of 2,000 memories")
    print(table(["ingest", "server", "p50 ms", "p95 ms"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-template", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument("--skip-measure", action="store_true")
    parser.add_argument(
        "--before",
        type=Path,
        help="a checkout of the code before the check (git archive <commit> | tar -x -C DIR)",
    )
    args = parser.parse_args()
    print(f"code {code_version()}")
    if not args.skip_measure:
        measure(args.per_template, args.seed)
        print()
    if not args.skip_cost:
        cost(args.samples, args.before)


if __name__ == "__main__":
    main()
