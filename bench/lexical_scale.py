"""The BM25 index at 100k and 1M memories, in-process: this code's beside the previous one.

    python bench/lexical_scale.py [--sizes 100000,1000000] [--queries 200] [--baseline REV]

Generated chat lines (a log-normal length, median 12 words; a Zipf vocabulary that starts
with "the", "i", "you", ... and grows with the corpus, ~127k tokens at 100k lines, ~634k at
1M) are indexed by the code at ``--baseline`` (default: the commit before the segments) and
by the working tree's, each in a process of its own (RSS is per process); a third process
("loaded") opens the snapshot the second one saved. Each prints: the resident bytes the
index holds (RSS after the build or load minus RSS before it, freed memory returned to the
system first; again after the searches, which bring memory-mapped postings in), the peak
during the build, the build time from (token, seq) pairs as the store's load reads them
from FTS5 (or the snapshot's load time), and the p50/p95 of a search as the store makes it
(the vault's count of each word, the common-word cut, then the 150 best) for questions of
rare words, mixed ones (3 of the 40 commonest words, 2 of ranks 100-2,000, 1 rarer), and
common words only (5 of the ~60 commonest), with the median postings read per search. The
answers are compared with the baseline's (the exact BM25): the share of its 150 rows each
holds, and of its first 10 (the new index scores every row it returns exactly, but past
its budget of postings the commonest words only score the rows rarer words found).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import importlib.util
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, p50, p95, table
from mcp_memoryrouter.vault.rules.domain import NewRaw, SearchFilter
from mcp_memoryrouter.vault.search import lexical, lexical_snapshot
from mcp_memoryrouter.vault.search.ranking import prune_common
from mcp_memoryrouter.vault.search.rowtable import IndexRow
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "8497cf0"  # the commit before the segments: one array pair per token
COMMON = (
    "the i you to a and it is that of in for we my on this be with have was not but so what "
    "me just do can are at about your if like will know get think no yes he she they it's "
    "there out up one all how when would go or time been then from did had good really"
).replace("'", " ")
SYLLABLES = [s + v for s in "bdfgklmnprstvz" for v in "aeiou"]
CHUNK = 65_536
KINDS = ("rare", "mixed", "common")
WHICH = ("baseline", "new", "loaded")  # loaded: the new one's snapshot, in a fresh process


def word(rank: int, common: list[str]) -> str:
    if rank < len(common):
        return common[rank]
    out, n = [], rank
    while True:
        out.append(SYLLABLES[n % len(SYLLABLES)])
        n //= len(SYLLABLES)
        if not n:
            return "".join(out) + "x"  # never one of the common words


def corpus(size: int, path: Path) -> None:
    """Token ranks of ``size`` lines (flat) and each line's end, saved to ``path``."""
    rng = np.random.default_rng(size)
    vocabulary = int(40 * size**0.7)  # Heaps' law
    weights = 1.0 / (np.arange(vocabulary) + 2.7)
    lengths = np.clip(rng.lognormal(np.log(12), 0.8, size).astype(np.int64), 1, 200)
    ranks = rng.choice(vocabulary, int(lengths.sum()), p=weights / weights.sum())
    np.savez(path, ranks=ranks.astype(np.int32), ends=np.cumsum(lengths), vocabulary=vocabulary)


def questions(vocabulary: int, count: int) -> dict[str, list[list[int]]]:
    rng = np.random.default_rng(7)
    common = len(COMMON.split())

    def pick(low: int, high: int, n: int) -> list[int]:
        return [int(r) for r in rng.integers(low, high, n)]

    return {
        "rare": [pick(2_000, vocabulary, 2) for _ in range(count)],
        "mixed": [
            pick(0, 40, 3) + pick(100, 2_000, 2) + pick(2_000, vocabulary, 1) for _ in range(count)
        ],
        "common": [pick(0, common, 5) for _ in range(count)],
    }


def rss() -> int:
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def baseline_module(rev: str) -> ModuleType:
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:mcp_memoryrouter/vault/search/lexical.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "lexical_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("lexical_baseline", path)
    assert spec is not None and spec.loader is not None
    module = sys.modules["lexical_baseline"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def child(which: str, corpus_path: Path, rev: str, count: int, saved: Path) -> dict[str, Any]:
    module = baseline_module(rev) if which == "baseline" else lexical
    data = np.load(corpus_path)
    ranks, ends, vocabulary = data["ranks"], data["ends"], int(data["vocabulary"])
    common = COMMON.split()
    words = [word(r, common) for r in range(vocabulary)]
    asked = questions(vocabulary, count)
    seqs = np.repeat(np.arange(1, ends.size + 1), np.diff(ends, prepend=0))  # before "before"
    gc.collect()
    before, peak_before = rss(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    if which == "loaded":
        loaded = lexical_snapshot.load(saved)
        assert loaded is not None
        index = loaded[0]
    else:
        rows = (IndexRow(s, "v", 1, None, 0, 0, None) for s in range(1, ends.size + 1))

        def pairs() -> Iterator[list[tuple[str, int]]]:
            for a in range(0, ranks.size, CHUNK):
                chunk = ranks[a : a + CHUNK].tolist()
                yield [
                    (words[r], s) for r, s in zip(chunk, seqs[a : a + CHUNK].tolist(), strict=True)
                ]

        index = module.LexicalIndex.bulk(rows, pairs(), module.BM25)
    built = time.perf_counter() - start
    gc.collect()
    held = rss() - before
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - max(before, peak_before)
    out: dict[str, Any] = {"held": held, "peak": max(peak, held), "build": built}
    out.update(searches(index, asked, words))
    out["held after searches"] = rss() - before
    if which == "new":
        start = time.perf_counter()
        lexical_snapshot.save(index, saved, {})
        out["save"] = time.perf_counter() - start
        out["file"] = sum(f.stat().st_size for f in saved.iterdir())
    return out


def searches(index: Any, asked: dict[str, list[list[int]]], words: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"rows": {}}
    for kind in KINDS:
        times, scored, rows = [], [], out["rows"].setdefault(kind, [])
        for ranks in asked[kind]:
            terms = [words[r] for r in ranks]
            before = getattr(index, "scored", 0)
            start = time.perf_counter()
            kept = prune_common(terms, *index.doc_freqs("v", terms))
            found = index.search("v", kept, 150, SearchFilter())
            times.append((time.perf_counter() - start) * 1000)
            scored.append(getattr(index, "scored", 0) - before)
            rows.append([seq for seq, _ in found])
        out[kind] = [p50(times), p95(times), p50([float(s) for s in scored])]
    return out


def store_start(size: int, tmp: Path) -> list[str]:
    """A serving SQLite store of ``size`` generated lines: seconds from opening it to the
    first lexical search's answer, loading from FTS5, then from the snapshot that load saved
    (with 1% more rows written meanwhile by a store that does not serve)."""
    path = tmp / f"corpus-{size}.npz"
    corpus(size, path)
    data = np.load(path)
    ranks, ends = data["ranks"], data["ends"]
    words = [word(r, COMMON.split()) for r in range(int(data["vocabulary"]))]
    lines = [
        " ".join(words[r] for r in ranks[a:b].tolist())
        for a, b in zip([0, *ends[:-1].tolist()], ends.tolist(), strict=True)
    ]
    database = tmp / f"vault-{size}.sqlite3"

    def ingest(store: SQLiteStore, first: int, last: int) -> None:
        for a in range(first, last, 1_000):
            rows = [
                NewRaw(f"m{i}", "user", lines[i % size], 0, i * 1000, None, f"m{i}", 0)
                for i in range(a, min(a + 1_000, last))
            ]
            store.ingest("v", rows, None)

    store = SQLiteStore(database)
    store.create_vault("v", "ref-v", 0)
    ingest(store, 0, size)
    store.close()
    out = []
    for how in ("from FTS5", "from the snapshot"):
        start = time.perf_counter()
        store = SQLiteStore(database, serving=True)
        store.search_lexical("v", ["the", words[500], words[5_000]], 150, SearchFilter())
        out.append(f"{how} {time.perf_counter() - start:.1f} s")
        store.close()
        store = SQLiteStore(database)  # writes the snapshot does not hold
        ingest(store, size, size + size // 100)
        store.close()
    return out


def overlap(
    exact: dict[str, list[list[int]]], found: dict[str, list[list[int]]]
) -> dict[str, tuple[float, float]]:
    """Per kind, the mean share of the exact answer's rows held, of its 150 and of its 10."""
    out = {}
    for kind in KINDS:
        shares = [
            tuple(len(set(e[:n]) & set(f[:n])) / len(e[:n]) if e else 1.0 for n in (150, 10))
            for e, f in zip(exact[kind], found[kind], strict=True)
        ]
        out[kind] = (float(np.mean([a for a, _ in shares])), float(np.mean([b for _, b in shares])))
    return out


def run(which: str, corpus_path: Path, rev: str, count: int, saved: Path) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", which, "--corpus", str(corpus_path)]
    command += ["--baseline", rev, "--queries", str(count), "--saved", str(saved)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--store", default="100000", help="sizes of the start-up run ('' none)")
    parser.add_argument("--child", choices=WHICH)
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--saved", type=Path)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.corpus, args.baseline, args.queries, args.saved)))
        return
    print(f"code {code_version()}, baseline {args.baseline}, {args.queries} questions a kind")
    mib = 1024 * 1024
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in [int(s) for s in args.sizes.split(",") if s]:
            path = Path(tmp) / f"corpus-{size}.npz"
            corpus(size, path)
            saved = Path(tmp) / f"saved-{size}"
            results = {w: run(w, path, args.baseline, args.queries, saved) for w in WHICH}
            for which, r in results.items():
                held = overlap(results["baseline"]["rows"], r["rows"])
                rows.append(
                    [
                        f"{size:,}",
                        which,
                        f"{r['held'] / mib:.0f} / {r['held after searches'] / mib:.0f}",
                        f"{r['peak'] / mib:.0f}",
                        f"{r['build']:.2f}",
                        *(f"{r[k][0]:.1f} / {r[k][1]:.1f} ({r[k][2]:,.0f})" for k in KINDS),
                        *(f"{held[k][0]:.3f} / {held[k][1]:.3f}" for k in KINDS),
                    ]
                )
                print(rows[-1], flush=True)
            new = results["new"]
            print(f"snapshot: saved in {new['save']:.1f} s, {new['file'] / mib:.0f} MiB on disk")
        for size in [int(s) for s in args.store.split(",") if s]:
            print(f"start to first search, {size:,} memories:", *store_start(size, Path(tmp)))
    headers = ["memories", "index", "held MiB (after searches)", "build peak MiB", "build / load s"]
    headers += [f"{k} p50 / p95 ms (postings)" for k in KINDS]
    headers += [f"{k}: exact 150 / 10 held" for k in KINDS]
    if rows:
        print(table(headers, rows))


if __name__ == "__main__":
    main()
