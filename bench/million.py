"""One vault of N raw memories, served by a real server: search, memory, start-up, file size.

    python bench/million.py [--sizes 10000,100000,1000000] [--samples 100] [--keep DIR]
                            [--root OTHER_CHECKOUT]

For each size a vault of generated chat lines (a Zipf vocabulary with the words people type
most, user lines of ~4-30 words and assistant units of ~20-80) is bulk-loaded in-process,
with vectors from an instant embedder double: each word a fixed random direction, a text the
normalised sum of its words' directions weighted by rarity (texts that share words are near,
as with a real model, at no cost). The same double answers the server's ``openai`` embedder
over loopback (``POST /v1/embeddings``), so only the server's own cost is measured.

A real ``mcp-memoryrouter serve`` then starts on the vault; printed per size: seconds to
``/healthz``, to the first search answered and until its background work after start is
done (a large vector index fitted and saved; the searches are timed after it), hybrid search
p50/p95 over three kinds of question (rare words, mixed, common words only) with the
server's CPU per search (all its threads, from /proc: what the machine pays whatever the
load), RSS steady after the searches and the peak (VmHWM: start-up, index loading, searches
and one consolidation batch checked out), and the vault file's bytes per memory. ``--root``
serves the same vault with another checkout's code too (a baseline: ``git worktree add
/tmp/base <commit>``), side by side.
``--keep DIR`` keeps the built vaults (``DIR/<size>``) and reuses them on the next run.
``--postgres`` also builds each size in PostgreSQL (an embedded server of the bench's own, or
``--database-url`` of a server whose databases it may create and drop) and serves it there,
printed beside SQLite (the vault's bytes: the database's size).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx2
import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, embeddings_upstream, p50, p95, started, table
from bench.load import cpu_seconds
from bench.vault import postgres_database
from mcp_memoryrouter.vault.rules.domain import Role
from mcp_memoryrouter.vault.service import IncomingMessage, VaultService
from mcp_memoryrouter.vault.store import Store
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore

DIM = 384
MODEL = "bench-words"  # the openai embedder's model name: vectors stored as "openai:bench-words"
DAY_MS = 86_400_000
START_MS = 1_640_995_200_000  # 2022-01-01
COMMON = [
    "the",
    "i",
    "you",
    "to",
    "and",
    "a",
    "it",
    "of",
    "is",
    "that",
    "in",
    "we",
    "for",
    "my",
    "me",
    "was",
    "on",
    "this",
    "have",
    "be",
    "with",
    "so",
    "but",
    "not",
    "what",
    "just",
    "do",
    "are",
    "at",
    "can",
    "like",
    "if",
    "about",
    "your",
    "know",
    "all",
    "they",
    "get",
    "be",
    "there",
    "think",
    "yes",
    "no",
    "would",
    "one",
    "out",
    "some",
    "how",
    "when",
    "up",
    "did",
    "going",
    "really",
    "now",
    "well",
]
SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ran",
    "tes",
    "vo",
    "bel",
    "dor",
    "fin",
    "gar",
    "hul",
    "ist",
    "jen",
    "kor",
    "lum",
    "nal",
    "per",
    "quo",
    "sil",
    "tav",
]
NAMES = [
    "Anna",
    "Ben",
    "Carla",
    "Dev",
    "Emma",
    "Farid",
    "Grace",
    "Hugo",
    "Ines",
    "Jonas",
    "Kai",
    "Lena",
    "Marco",
    "Nora",
    "Omar",
]


def vocabulary(size: int, seed: int = 7) -> list[str]:
    """Common words first, then made-up words: rank r is used with probability ~ 1/r."""
    rng = random.Random(seed)
    words = list(COMMON) + list(NAMES)
    seen = set(words)
    while len(words) < size:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


class Lines:
    """Generated chat lines, deterministic by index."""

    def __init__(self, vocab_size: int = 30_000) -> None:
        self.words = vocabulary(vocab_size)
        weights = 1.0 / np.arange(1, len(self.words) + 1)
        self._cdf = np.cumsum(weights / weights.sum())

    def line(self, i: int) -> tuple[Role, str]:
        rng = np.random.default_rng(i)
        role: Role = "user" if i % 2 == 0 else "assistant"
        n = int(rng.integers(4, 31)) if role == "user" else int(rng.integers(20, 81))
        picks = np.searchsorted(self._cdf, rng.random(n))
        text = " ".join(self.words[min(int(p), len(self.words) - 1)] for p in picks)
        if i % 7 == 0:
            text += f" at {int(rng.integers(1, 12))} pm"
        return role, text[0].upper() + text[1:] + "."


class WordVectors:
    """The instant embedder double: a text is the normalised, rarity-weighted sum of its
    words' fixed random directions."""

    def __init__(self, words: Sequence[str]) -> None:
        self._rank = {w.lower(): r for r, w in enumerate(words)}

    def _word(self, word: str) -> npt.NDArray[np.float32]:
        seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
        rank = self._rank.get(word, len(self._rank))
        return v * np.float32(np.log(2.0 + rank) / np.linalg.norm(v))

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        cache: dict[str, npt.NDArray[np.float32]] = {}
        for row, text in enumerate(texts):
            for raw in text.lower().replace(".", " ").replace(":", " ").split():
                if raw not in cache:
                    cache[raw] = self._word(raw)
                out[row] += cache[raw]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms == 0, 1, norms)).astype(np.float32)


def build(data_dir: Path, size: int, lines: Lines, vectors: WordVectors) -> str:
    """The vault: ``size`` raw memories over three years, in sessions of 40 lines, each with
    its vector stored as the server's embedder would (model ``openai:bench-words``)."""
    import sqlite3

    data_dir.mkdir(parents=True, exist_ok=True)
    key = _fill(SQLiteStore(data_dir / "vault.sqlite3"), size, lines)
    conn = sqlite3.connect(data_dir / "vault.sqlite3")
    seqs = conn.execute("SELECT seq, content FROM memories ORDER BY seq").fetchall()
    for chunk in _embedded(seqs, vectors):
        conn.executemany(
            "INSERT OR REPLACE INTO vectors (seq, model, vec) VALUES (?, ?, ?)",
            [(seq, f"openai:{MODEL}", v.tobytes()) for seq, v in chunk],
        )
        conn.commit()
    conn.execute("DELETE FROM embed_queue")
    conn.commit()
    conn.close()
    (data_dir / "key").write_text(key)
    return key


def build_postgres(url: str, data_dir: Path, size: int, lines: Lines, vectors: WordVectors) -> str:
    """The same vault in PostgreSQL (a database of its own), vectors copied in."""
    import psycopg

    from mcp_memoryrouter.vault.store.postgres import PostgresStore

    data_dir.mkdir(parents=True, exist_ok=True)
    key = _fill(PostgresStore(url, pool_min=0, pool_max=2), size, lines)
    with psycopg.connect(url) as conn:
        seqs = conn.execute("SELECT seq, content FROM memories ORDER BY seq").fetchall()
        with conn.cursor().copy("COPY vectors (seq, model, vec) FROM STDIN") as copy:
            for chunk in _embedded(seqs, vectors):
                for seq, v in chunk:
                    copy.write_row((seq, f"openai:{MODEL}", "[" + ",".join(map(str, v)) + "]"))
        conn.execute("DELETE FROM embed_queue")
        conn.execute("ANALYZE")
    (data_dir / "key").write_text(key)
    return key


def _fill(store: Store, size: int, lines: Lines) -> str:
    """A new vault of ``size`` generated lines, ingested 2,000 at a time without vectors;
    the store closed after. Its key."""
    service = VaultService(store, clock=lambda: time.time_ns() // 1_000_000, lease_seconds=900)
    key, _ = service.create_vault()
    access = service.authenticate(key)
    step = 3 * 365 * DAY_MS // size
    started = time.perf_counter()
    for start in range(0, size, 2000):
        batch = []
        for i in range(start, min(size, start + 2000)):
            role, text = lines.line(i)
            batch.append(IncomingMessage(role, text, START_MS + i * step, f"s{i // 40}"))
        service.ingest(access, batch, None, embeddings="none")
        if start % 100_000 == 0:
            print(f"    {start:,} rows, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    store.close()
    return key


def _embedded(
    seqs: Sequence[tuple[int, str]], vectors: WordVectors
) -> Iterator[list[tuple[int, npt.NDArray[np.float32]]]]:
    """Each memory's (seq, vector), 20,000 at a time (bench set-up: what the worker writes)."""
    for start in range(0, len(seqs), 20_000):
        chunk = seqs[start : start + 20_000]
        matrix = vectors.embed([content for _, content in chunk])
        yield [(seq, v) for (seq, _), v in zip(chunk, matrix, strict=True)]


def questions(lines: Lines) -> dict[str, list[str]]:
    """Three kinds: two rare words; a name, a mid word and common ones; common words only."""
    rng = random.Random(3)
    words = lines.words
    rare = [f"{rng.choice(words[3000:])} {rng.choice(words[3000:])}" for _ in range(40)]
    mixed = [
        f"what did {rng.choice(NAMES)} say about the {rng.choice(words[200:3000])}"
        for _ in range(40)
    ]
    common = [" ".join(rng.sample(COMMON, 5)) for _ in range(40)]
    return {"rare words": rare, "mixed": mixed, "common words only": common}


def status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def serve_and_measure(
    data_dir: Path,
    key: str,
    double: str,
    samples: int,
    cwd: Path | None,
    database_url: str | None = None,
) -> dict[str, float]:
    env = {
        **({"MEMORYROUTER_DATABASE_URL": database_url} if database_url else {}),
        "MEMORYROUTER_EMBEDDINGS": "openai",
        "MEMORYROUTER_OPENAI_BASE_URL": double,
        "MEMORYROUTER_OPENAI_MODEL": MODEL,
        "MEMORYROUTER_OPENAI_DIM": str(DIM),
        "MEMORYROUTER_OPENAI_API_KEY": "bench",
    }
    figures: dict[str, float] = {}
    begun = time.perf_counter()
    with (
        started(data_dir, env, cwd) as (url, proc),
        httpx2.Client(
            base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120
        ) as http,
    ):
        figures["start: /healthz s"] = _until(lambda: http.get("/healthz"), begun, proc)
        figures["start: first search s"] = _until(
            lambda: http.post("/v1/memory/search", json={"query": "the budget", "limit": 10}),
            begun,
            proc,
        )
        figures["start: settled s"] = settled(proc.pid) - begun
        asked = questions(Lines())
        for kind, qs in asked.items():
            times = []
            cpu = cpu_seconds(proc.pid)
            for n in range(samples):
                q = qs[n % len(qs)]
                t = time.perf_counter()
                asked_one = http.post("/v1/memory/search", json={"query": q, "limit": 10})
                asked_one.raise_for_status()
                times.append((time.perf_counter() - t) * 1000)
            used = cpu_seconds(proc.pid) - cpu
            figures[f"search {kind}: server CPU ms"] = used * 1000 / samples
            figures[f"search {kind} p50 ms"] = p50(times)
            figures[f"search {kind} p95 ms"] = p95(times)
        figures["RSS steady MiB"] = status(proc.pid, "VmRSS") / 2**20
        http.post(
            "/v1/memory/consolidate/checkout", json={"tier": 1, "max_tokens": 8000}
        ).raise_for_status()
        figures["RSS peak MiB"] = status(proc.pid, "VmHWM") / 2**20
    return figures


def settled(pid: int, quiet: float = 0.05, most: float = 600.0) -> float:
    """When the server's background work after start (an index fitted and saved) is done:
    the first second in which it used under ``quiet`` CPU seconds (``most`` at the latest)."""
    deadline = time.perf_counter() + most
    before = cpu_seconds(pid)
    while time.perf_counter() < deadline:
        time.sleep(1.0)
        now = cpu_seconds(pid)
        if now - before < quiet:
            return time.perf_counter() - 1.0
        before = now
    return time.perf_counter()


def _until(call: object, started: float, proc: subprocess.Popen[bytes]) -> float:
    while True:
        if proc.poll() is not None:
            raise RuntimeError("the server exited during start-up")
        try:
            response = call()  # type: ignore[operator]
            if response.status_code < 500:
                response.raise_for_status()
                return time.perf_counter() - started
        except (httpx2.TransportError, httpx2.HTTPStatusError):
            pass
        time.sleep(0.05)


def vault_bytes(data_dir: Path, database_url: str | None = None) -> int:
    if database_url is None:
        return sum(p.stat().st_size for p in data_dir.glob("vault.sqlite3*"))
    import psycopg

    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return 0 if row is None else int(row[0])


@contextmanager
def postgres(database_url: str | None) -> Iterator[str]:
    """A server's maintenance URL: the one given, or an embedded server of the bench's own."""
    if database_url is not None:
        yield database_url
        return
    from tests.pg import server

    with server() as url:
        yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--keep", type=Path, help="keep (and reuse) the built vaults here")
    parser.add_argument("--root", type=Path, help="another checkout served beside this one")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL beside SQLite")
    parser.add_argument("--database-url", help="with --postgres: a server to use")
    args = parser.parse_args()
    lines = Lines()
    vectors = WordVectors(lines.words)
    base = args.keep or Path(tempfile_dir())
    codes = [("this", None)] + ([(f"{args.root}", args.root)] if args.root else [])
    results: dict[str, dict[str, dict[str, float]]] = {}
    try:
        with embeddings_upstream(vectors.embed, MODEL) as double:
            for size in [int(s) for s in args.sizes.split(",")]:
                data_dir = base / str(size)
                if not (data_dir / "key").is_file():
                    shutil.rmtree(data_dir, ignore_errors=True)
                    t = time.perf_counter()
                    build(data_dir, size, lines, vectors)
                    print(f"  built {size:,} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
                key = (data_dir / "key").read_text()
                for name, cwd in codes:
                    figures = serve_and_measure(data_dir, key, double, args.samples, cwd)
                    figures["vault bytes per memory"] = vault_bytes(data_dir) / size
                    results.setdefault(name, {})[f"{size:,}"] = figures
                    print(f"  {name} @ {size:,}: {figures}", file=sys.stderr)
                if args.postgres:
                    results.setdefault("PostgreSQL", {})[f"{size:,}"] = on_postgres(
                        args, base, size, lines, vectors, double
                    )
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    print(f"code {code_version()}")
    for name, by_size in results.items():
        print(f"\n{name}")
        sizes = list(by_size)
        names = list(next(iter(by_size.values())))
        rows = [[n, *(f"{by_size[s][n]:.1f}" for s in sizes)] for n in names]
        print(table(["figure", *sizes], rows))


def on_postgres(
    args: argparse.Namespace,
    base: Path,
    size: int,
    lines: Lines,
    vectors: WordVectors,
    double: str,
) -> dict[str, float]:
    """The size built and served on PostgreSQL, with this checkout's code."""
    with postgres(args.database_url) as admin, postgres_database(admin, size) as url:
        data_dir = base / f"pg-{size}"
        shutil.rmtree(data_dir, ignore_errors=True)
        t = time.perf_counter()
        key = build_postgres(url, data_dir, size, lines, vectors)
        print(f"  built {size:,} in PostgreSQL in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        figures = serve_and_measure(data_dir, key, double, args.samples, None, url)
        figures["vault bytes per memory"] = vault_bytes(data_dir, url) / size
        print(f"  PostgreSQL @ {size:,}: {figures}", file=sys.stderr)
        return figures


def tempfile_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="memoryrouter-million-")


if __name__ == "__main__":
    main()
