"""Each entry's own evidence: where its floors and weak bounds lie (``limits.EVIDENCE_*``,
``limits.WEAK_SUPPORT_*``), measured, and what recording it costs a commit.

    python bench/evidence.py [--batches 40] [--seed 7] [--samples 30] [--before DIR]
        [--skip-cost] [--skip-measure]

Scripted batches, each a week of conversations: six facts drawn from the fact templates of
the peers benchmark (``bench/peers_templates.py``), each told by the user and acknowledged
by the assistant, between twelve turns of small talk (``bench/stories.py``): 24 sources.
Scripted entries are scored against them as the server scores them (``vault/evidence.py``):
with the local model, an entry embedded with the batch's dates, a source as the vault
embeds it (its date, the turn before it in its conversation, its text); and lexically
(``rules.evidence.lexical``). The entries:

- **paraphrase of one fact**: the fact in other words (``bench/near_duplicates.py``'s
  paraphrase of its template), one per fact: supported;
- **two facts in one entry**: two of those paraphrases as one entry: supported;
- **same kind, other details**: a fact of a template the batch holds, every slot drawn
  again (an invented detail): not supported by any source, though close to one;
- **a fact the batch does not hold**: a paraphrase of a template none of its sources tells:
  not supported.

Printed, per scoring: each kind's best score (its best-supporting source) in percentiles,
and for candidate weak bounds the share of each kind flagged weak; then for candidate floors
how many of a paraphrase's two own sources are kept (the statement and its acknowledgement)
and how many other sources are kept with them. Then the cost: ``POST .../commit`` of six
entries over a batch of 24 embedded sources, through the HTTP API, this checkout beside
``--before`` (a checkout of the code before evidence was recorded), interleaved, p50 and p95.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from random import Random

import httpx2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, new_vault, p50, p95, server, table
from bench.near_duplicates import PARAPHRASES
from bench.peers_templates import TEMPLATES
from bench.stories import SMALL_TALK
from mcp_memoryrouter.vault.rules import evidence
from mcp_memoryrouter.vault.search.embeddings import LocalMiniLM
from mcp_memoryrouter.vault.search.vectors import embedding_text

START = datetime(2026, 2, 2, 9, 0, tzinfo=UTC)
FACTS = 6  # facts a batch tells
WEAK_BOUNDS = {"cosine": (0.45, 0.5, 0.55, 0.6, 0.65, 0.7), "lexical": (0.1, 0.15, 0.2, 0.25, 0.3)}
FLOORS = {"cosine": (0.3, 0.35, 0.4, 0.45, 0.5, 0.55), "lexical": (0.05, 0.1, 0.15, 0.2)}
KINDS = (
    "paraphrase of one fact",
    "two facts in one entry",
    "same kind, other details",
    "a fact the batch does not hold",
)


@dataclass(frozen=True)
class Source:
    text: str
    at: int  # ms
    before: str | None  # the turn before it in its conversation


@dataclass(frozen=True)
class Batch:
    sources: list[Source]
    entries: list[tuple[str, str, tuple[int, ...]]]  # (kind, text, its own sources' indexes)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _told(template_number: int, rng: Random) -> tuple[str, str, str]:
    """A fact of the template: what the user says, the assistant's answer, a paraphrase."""
    template = TEMPLATES[template_number]
    slots = {name: draw(rng) for name, draw in template.slots.items()}
    return (
        rng.choice(template.says).format(**slots),
        template.ack.format(**slots),
        PARAPHRASES[template_number].format(**slots),
    )


def batches(count: int, seed: int) -> list[Batch]:
    rng = Random(seed)
    made = []
    for _ in range(count):
        numbers = rng.sample(range(len(TEMPLATES)), FACTS + 3)
        told = [_told(n, rng) for n in numbers[:FACTS]]
        talk = [(SMALL_TALK[k][1], SMALL_TALK[k + 1][1]) for k in range(0, len(SMALL_TALK), 2)]
        # (which fact, or None for small talk; what the user said; the answer)
        turns: list[tuple[int | None, str, str]] = [
            (i, said, ack) for i, (said, ack, _) in enumerate(told)
        ]
        turns += [(None, said, ack) for said, ack in rng.sample(talk, FACTS)]
        rng.shuffle(turns)
        sources: list[Source] = []
        own: dict[int, tuple[int, int]] = {}
        moment = START
        for fact, said, answer in turns:
            moment += timedelta(hours=rng.randint(3, 20))
            if fact is not None:
                own[fact] = (len(sources), len(sources) + 1)
            sources.append(Source(said, _ms(moment), None))
            sources.append(Source(answer, _ms(moment + timedelta(minutes=1)), said))
        entries: list[tuple[str, str, tuple[int, ...]]] = [
            (KINDS[0], told[i][2], own[i]) for i in range(FACTS)
        ]
        for a, b in ((0, 1), (2, 3), (4, 5)):
            entries.append((KINDS[1], f"{told[a][2]} {told[b][2]}", (*own[a], *own[b])))
        for i in range(3):
            entries.append((KINDS[2], _told(numbers[i], rng)[2], ()))
            entries.append((KINDS[3], _told(numbers[FACTS + i], rng)[2], ()))
        made.append(Batch(sources, entries))
    return made


def scores(batch: Batch, model: LocalMiniLM | None) -> tuple[list[list[float]], evidence.Scoring]:
    """Each entry's score against every source of its batch, as the server scores them."""
    if model is None:
        said = [evidence.words(s.text) for s in batch.sources]
        return [
            [evidence.lexical(evidence.words(text), s) for s in said]
            for _, text, _ in batch.entries
        ], "lexical"
    covers = (batch.sources[0].at, batch.sources[-1].at)
    entries = model.embed([embedding_text(text, *covers) for _, text, _ in batch.entries])
    sources = model.embed([embedding_text(s.text, s.at, s.at, s.before) for s in batch.sources])
    return (entries @ sources.T).tolist(), "cosine"


def measure(count: int, seed: int) -> None:
    drawn = batches(count, seed)
    for model in (LocalMiniLM(), None):
        best: dict[str, list[float]] = {kind: [] for kind in KINDS}
        own_scores: dict[str, list[list[float]]] = {kind: [] for kind in KINDS[:2]}
        other_scores: dict[str, list[list[float]]] = {kind: [] for kind in KINDS[:2]}
        scoring: evidence.Scoring = "lexical"
        for batch in drawn:
            found, scoring = scores(batch, model)
            for (kind, _, own), row in zip(batch.entries, found, strict=True):
                best[kind].append(max(row))
                if own:
                    own_scores[kind].append([row[i] for i in own])
                    other_scores[kind].append([x for i, x in enumerate(row) if i not in own])
        print(f"## {scoring} ({sum(len(b.entries) for b in drawn)} entries, {count} batches)")
        rows = [
            [kind, str(len(v)), *(f"{x:.3f}" for x in np.percentile(v, [1, 5, 50, 95, 99]))]
            for kind, v in best.items()
        ]
        print(table(["best score of", "n", "p1", "p5", "p50", "p95", "p99"], rows))
        print()
        rows = [
            [f"{b:.2f}", *(f"{100 * float(np.mean(np.array(v) < b)):.1f} %" for v in best.values())]
            for b in WEAK_BOUNDS[scoring]
        ]
        print("flagged weak: best score below the bound")
        print(table(["bound", *KINDS], rows))
        print()
        rows = []
        for floor in FLOORS[scoring]:
            line = [f"{floor:.2f}"]
            for kind in KINDS[:2]:
                kept = np.mean([np.mean([x >= floor for x in o]) for o in own_scores[kind]])
                others = np.mean([sum(x >= floor for x in o) for o in other_scores[kind]])
                line += [f"{100 * float(kept):.1f} %", f"{float(others):.2f}"]
            rows.append(line)
        print("kept as evidence: an entry's own sources (the statement and its answer, per")
        print("fact), and how many other sources of the batch with them")
        heads = ["own kept", "others kept"]
        print(table(["floor", *(f"{k[:10]}: {h}" for k in KINDS[:2] for h in heads)], rows))
        print()


def cost(samples: int, before: Path | None) -> None:
    """Commit with and without evidence, interleaved: this checkout's server beside
    ``before``'s (a checkout of the code before evidence was recorded, when given)."""
    servers: dict[str, Path | None] = {"this checkout": None} | (
        {} if before is None else {"before evidence": before.resolve()}
    )
    drawn = batches(samples + 3, 11)
    with contextlib.ExitStack() as stack:
        clients: dict[str, httpx2.Client] = {}
        for name, root in servers.items():
            data = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            key = new_vault(data, "evidence", cwd=root)
            url = stack.enter_context(server(data, cwd=root))
            http = httpx2.Client(base_url=url, headers={"X-Memory-Key": key}, timeout=120)
            clients[name] = stack.enter_context(http)
        timings: dict[str, list[tuple[float, float]]] = {}
        for round_, batch in enumerate(drawn):  # the first 3 rounds warm the model
            for name, http in clients.items():
                elapsed = _commit_once(http, batch)
                if round_ >= 3:
                    timings.setdefault(name, []).append(elapsed)
    rows = [
        [name, *(f"{f([x[i] for x in t]):.1f}" for i in (0, 1) for f in (p50, p95))]
        for name, t in timings.items()
    ]
    print(f"{samples} commits per server, after 3 warm-up rounds: 6 entries, 24 sources")
    print("commit: its answer; embedded: until the reflections' vectors are stored too")
    heads = ["commit p50 ms", "commit p95 ms", "embedded p50 ms", "embedded p95 ms"]
    print(table(["server", *heads], rows))


def _commit_once(http: httpx2.Client, batch: Batch) -> tuple[float, float]:
    """Store the batch's sources (waiting for their vectors), check them out and commit six
    of its entries: the commit's time, and the time until the reflections are embedded too
    (the embedding worker's queue empty again), in ms."""
    messages = [
        {
            "role": "user",
            "content": s.text,
            "date": datetime.fromtimestamp(s.at / 1000, UTC).isoformat(),
        }
        for s in batch.sources
    ]
    http.post("/v1/memory/ingest", json={"messages": messages}).raise_for_status()
    while http.get("/v1/memory/stats").json()["pending_embeddings"]:
        time.sleep(0.05)
    out = http.post("/v1/memory/consolidate/checkout", json={"tier": 1})
    out.raise_for_status()
    entries = [{"text": text, "importance": 5} for _, text, _ in batch.entries[:6]]
    done = http.post(
        "/v1/memory/consolidate/commit",
        json={"batch_id": out.json()["batch_id"], "entries": entries},
    )
    done.raise_for_status()
    started = time.perf_counter() - done.elapsed.total_seconds()
    while http.get("/v1/memory/stats").json()["pending_embeddings"]:
        time.sleep(0.005)
    return done.elapsed.total_seconds() * 1000, (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument("--skip-measure", action="store_true")
    parser.add_argument(
        "--before",
        type=Path,
        help="a checkout of the code before evidence (git archive <commit> | tar -x -C DIR)",
    )
    args = parser.parse_args()
    print(f"code {code_version()}")
    if not args.skip_measure:
        measure(args.batches, args.seed)
    if not args.skip_cost:
        cost(args.samples, args.before)


if __name__ == "__main__":
    main()
