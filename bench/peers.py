"""This server against the MCP memory servers a user would otherwise pick, on one corpus.

    python bench/peers.py [--size 10000] [--queries 200] [--seed 7] [--hard]

The same generated corpus (dated conversational memories) and the same natural-language
questions go through MCP to three systems, each its own process:

- ours: ``mcp-memoryrouter serve`` (``local`` embedder), the SDK's Streamable HTTP client,
  ``store_memory`` once per memory (the tool takes one), ``search_memories`` with limit 10;
- ``@modelcontextprotocol/server-memory`` (npm), stdio: one entity per conversation whose
  observations are its memories (its README: entities for events, observations for atomic
  facts), ``create_entities`` once per conversation, ``search_nodes``;
- ``basic-memory`` (PyPI), stdio ``basic-memory mcp``: one note per memory (``write_note``),
  ``search_notes`` with page_size 10. It needs Python >= 3.12; without one its column says why.

Peers are installed on first run into ``bench/.peers/`` (git-ignored), printing each step;
basic-memory's venv is made with a Python >= 3.12 found on the machine (``PEERS_PYTHON``, PATH,
pyenv). basic-memory stores a note in ~0.3-1 s here, so 10,000 take hours: ``--only
server-memory`` leaves it out, ``--size 1000`` runs all three in minutes.
Ingest is timed twice: until the last write is acknowledged, and until the last memory is
searchable (ours: no embeddings pending). Recall@10: the share of questions with a gold memory
among the first 10 memories returned, mapped back to the corpus by exact text. RSS: the server
process's resident memory, peak (sampled every 0.2 s) and at the end.

``--hard`` asks the hard question set instead (``bench/peers_corpus.py``): a recurring cast of
12-40 people shares the names, questions are in other words and name the month where a person
has several facts of one kind (kinds "paraphrase" and "dated"), so a name match alone no longer
finds the fact.
"""

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, p50, p95, table
from bench.peers_adapters import (
    NotRun,
    Result,
    progress,
    run_basic_memory,
    run_ours,
    run_server_memory,
)
from bench.peers_corpus import (
    Corpus,
    Kind,
    Query,
    build_corpus,
    build_hard_queries,
    build_queries,
)

# ---------------------------------------------------------------------------------------------
# Report


def recall(result: Result, kind: Kind | None = None) -> float:
    hits = [hit for k, hit in result.hits if kind is None or k == kind]
    return 100 * sum(hits) / len(hits) if hits else float("nan")


def report(results: dict[str, Result | NotRun], queries: list[Query]) -> None:
    names = list(results)
    ours = results[names[0]]
    assert isinstance(ours, Result)
    kinds: tuple[Kind, ...] = ("keyword", "paraphrase", "dated", "temporal")
    counts = {kind: sum(q.kind == kind for q in queries) for kind in kinds}
    counts = {kind: n for kind, n in counts.items() if n}  # the kinds this question set asks
    rows: list[tuple[str, Callable[[Result], str]]] = [
        ("ingest acknowledged s", lambda r: f"{r.acknowledged_s:.1f}"),
        ("ingest searchable s", lambda r: f"{r.searchable_s:.1f}"),
        ("search p50 ms", lambda r: f"{p50(r.latencies_ms):.2f}"),
        ("search p95 ms", lambda r: f"{p95(r.latencies_ms):.2f}"),
        (f"recall@10 % (n={len(queries)})", lambda r: f"{recall(r):.1f}"),
        *(
            (f"  {kind} (n={n})", lambda r, k=kind: f"{recall(r, k):.1f}")
            for kind, n in counts.items()
        ),
        ("RSS peak MB", lambda r: f"{r.rss_peak_mb:.0f}"),
        ("RSS at end MB", lambda r: f"{r.rss_end_mb:.0f}"),
        ("p50 ratio peer/ours", lambda r: f"{p50(r.latencies_ms) / p50(ours.latencies_ms):.2f}"),
        ("searchable ratio peer/ours", lambda r: f"{r.searchable_s / ours.searchable_s:.2f}"),
    ]
    body = [
        [label, *(fmt(r) if isinstance(r, Result) else "not run" for r in results.values())]
        for label, fmt in rows
    ]
    print(table(["", *names], body))
    for name, result in list(results.items())[1:]:
        if isinstance(result, NotRun):
            print(f"{name}: not run: {result.reason}")
            continue
        speed = p50(result.latencies_ms) / p50(ours.latencies_ms)
        faster = f"{speed:.1f}x faster" if speed >= 1 else f"{1 / speed:.1f}x SLOWER"
        met = speed >= 10 and recall(ours) >= recall(result)
        print(
            f"vs {name}: ours searches {faster} at p50 (goal >= 10x faster), recall@10 "
            f"{recall(ours):.1f} vs {recall(result):.1f} (goal: equal or better): "
            + ("met" if met else "NOT met")
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000, help="memories (default 10000)")
    parser.add_argument("--queries", type=int, default=200, help="questions (default 200)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--hard",
        action="store_true",
        help="the hard question set: a recurring cast of 12-40 people, questions in other words, "
        "with the month where a person has several facts of one kind (see bench/peers_corpus.py)",
    )
    parser.add_argument(
        "--only",
        nargs="*",
        choices=["server-memory", "basic-memory"],
        default=None,
        help="peers to run (default: both)",
    )
    args = parser.parse_args()
    version = code_version()  # before the server starts and loads the package
    corpus = build_corpus(args.size, args.seed, hard=args.hard)
    ask = build_hard_queries if args.hard else build_queries
    queries = ask(corpus, args.queries, args.seed)
    progress(f"corpus: {len(corpus.memories)} memories, {len(queries)} questions")
    peers: dict[str, Callable[[Corpus, list[Query]], Result | NotRun]] = {
        "server-memory": run_server_memory,
        "basic-memory": run_basic_memory,
    }
    results: dict[str, Result | NotRun] = {}
    progress("mcp-memoryrouter")
    results["mcp-memoryrouter"] = run_ours(corpus, queries)
    for name, run in peers.items():
        if args.only is not None and name not in args.only:
            results[name] = NotRun("left out by --only")
            continue
        progress(name)
        try:
            results[name] = run(corpus, queries)
        except Exception as exc:  # one peer failing must not lose the others' figures
            results[name] = NotRun(f"failed: {type(exc).__name__}: {exc}")
    hard = ", hard questions" if args.hard else ""
    print(
        f"{len(corpus.memories)} memories, {len(queries)} questions, seed {args.seed}{hard}, "
        f"server code {version}"
    )
    report(results, queries)


if __name__ == "__main__":
    main()
