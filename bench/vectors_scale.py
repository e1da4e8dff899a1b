"""The vector index at 100k and a million rows, in-process: the projected float32 scan of
``8497cf0`` beside the int8 rows and inverted lists that replaced it.

    python bench/vectors_scale.py [--sizes 100000,1000000] [--queries 200] [--seed 7]

Vectors: generated chat lines (4 to 24 words: ~45 % from 300 common words, the rest from
one or two of 400 topics of ~75 words each, Zipf-like frequencies), each line the unit sum
of its words' vectors (a word: its topic's random unit vector plus its own noise; common
words random). Like sentence embeddings, lines share a common component and cluster by
topic without falling into clean clusters. Queries: 200 other lines of 4 to 12 words.
Rows: 80 % in vault ``main``, 5 % in each of ``v1`` to ``v4``.

Printed per size and index: bytes held (vectors, lists and row columns), build time (adding
rows in batches of 4,096, then fitting), save and load time of the snapshot (new index),
search p50/p95 at k = 150 over the whole of ``main`` and over ``v1`` (a vault filter: 5 % of
the rows), and recall@150 against an exact float32 scan of the same rows.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp_memoryrouter.vault.rules.domain import SearchFilter
from mcp_memoryrouter.vault.search import snapshot
from mcp_memoryrouter.vault.search.rowtable import IndexRow, RowTable
from mcp_memoryrouter.vault.search.vectors import PROBED_LISTS, VectorIndex

DIM, K, BATCH = 384, 150, 4096
COMMON_WEIGHT = 0.35  # a sentence encoder weighs "the" and "I" less than "Lisbon" (IDF-like)
VAULTS = ["main"] * 16 + ["v1", "v2", "v3", "v4"]  # 80 % and 5 % each
Floats = npt.NDArray[np.float32]


def unit(x: Floats) -> Floats:
    result: Floats = (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)
    return result


class Lines:
    """Generated chat lines as sums of word vectors (see the module's docstring)."""

    def __init__(self, seed: int, topics: int = 400, words: int = 30_000, common: int = 300):
        rng = np.random.default_rng(seed)
        centres = unit(rng.standard_normal((topics, DIM)).astype(np.float32))
        self.topic_of = np.sort(rng.integers(topics, size=words - common))
        own = unit(rng.standard_normal((words - common, DIM)).astype(np.float32))
        vectors = np.concatenate(
            [
                unit(rng.standard_normal((common, DIM)).astype(np.float32)),
                unit(centres[self.topic_of] + 0.9 * own),
            ]
        )
        vectors[:common] *= COMMON_WEIGHT
        self.words = np.concatenate([vectors, np.zeros((1, DIM), np.float32)])  # last: padding
        self.pad, self.common, self.topics = words, common, topics
        self.starts = common + np.searchsorted(self.topic_of, np.arange(topics + 1))
        self.weights = 1 / (np.arange(topics) + 10.0)
        self.weights /= self.weights.sum()

    def make(self, count: int, seed: int, longest: int = 24) -> Floats:
        rng = np.random.default_rng(seed)
        out = np.empty((count, DIM), np.float32)
        for start in range(0, count, 2048):
            n = min(2048, count - start)
            out[start : start + n] = unit(self.words[self._tokens(rng, n, longest)].sum(axis=1))
        return out

    def _tokens(self, rng: np.random.Generator, n: int, longest: int) -> npt.NDArray[np.intp]:
        length = rng.integers(4, longest + 1, size=n)
        first = rng.choice(self.topics, size=n, p=self.weights)
        second = rng.integers(self.topics, size=n)
        kind = rng.random((n, longest))
        topic = np.where(kind < 0.9, first[:, None], second[:, None])
        size = self.starts[topic + 1] - self.starts[topic]
        in_topic = self.starts[topic] + (size * rng.random((n, longest)) ** 2).astype(np.intp)
        common = (self.common * rng.random((n, longest)) ** 3).astype(np.intp)
        tokens = np.where(kind < 0.45, common, in_topic)
        tokens[np.arange(longest)[None, :] >= length[:, None]] = self.pad
        result: npt.NDArray[np.intp] = tokens
        return result


class ProjectedIndex:
    """The vector index of ``8497cf0`` (float32 rows; from 20,000 survivors a scan of 96-d
    projections, the best 8 x k rescored exactly), reduced to what this bench calls."""

    def __init__(self, dim: int) -> None:
        self.dim, self._rows = dim, RowTable()
        self._matrix = np.zeros((self._rows.capacity, dim), dtype=np.float32)
        self._basis: Floats | None = None
        self._projected = np.zeros((0, 0), dtype=np.float32)

    def nbytes(self) -> int:
        columns = sum(int(c.nbytes) for c in self._rows.columns.values())
        return int(self._matrix.nbytes + self._projected.nbytes) + columns

    def add(self, rows: Sequence[IndexRow], vectors: Floats) -> None:
        table = self._rows
        if table.reserve(table.size + len(rows)):
            self._matrix = np.resize(self._matrix, (table.capacity, self.dim))
        positions = [table.put(row) for row in rows]
        self._matrix[positions] = vectors

    def warm(self) -> None:
        n = self._rows.size
        sample = self._matrix[: n : max(1, n // 20_000)]
        _, directions = np.linalg.eigh(sample.T @ sample)
        self._basis = np.ascontiguousarray(directions[:, ::-1][:, : self.dim // 4], np.float32)
        self._projected = self._matrix[:n] @ self._basis

    def search(self, vault: str, query: Floats, k: int, where: SearchFilter) -> list[int]:
        mask = self._rows.mask(vault, where)
        assert mask is not None and self._basis is not None
        positions = np.flatnonzero(mask)
        n = self._rows.size
        if positions.size >= max(20_000, 8 * k + 1):
            if positions.size * 4 > n:
                approximate = (self._projected[:n] @ (query @ self._basis))[positions]
            else:
                approximate = self._projected[positions] @ (query @ self._basis)
            positions = positions[np.argpartition(-approximate, 8 * k - 1)[: 8 * k]]
        scores = self._matrix[positions] @ query
        best = np.argpartition(-scores, k - 1)[:k]
        return [int(s) for s in self._rows.columns["seq"][positions[best]]]


def rows_of(vaults: npt.NDArray[np.int_], start: int, count: int) -> list[IndexRow]:
    return [
        IndexRow(i, VAULTS[vaults[i]], 1, None, 0, 0, None) for i in range(start, start + count)
    ]


def build(
    index: ProjectedIndex | VectorIndex, vectors: Floats, vaults: npt.NDArray[np.int_]
) -> float:
    began = time.perf_counter()
    for start in range(0, len(vectors), BATCH):
        count = min(BATCH, len(vectors) - start)
        index.add(rows_of(vaults, start, count), vectors[start : start + count])
    index.warm()
    return time.perf_counter() - began


def truth(vectors: Floats, members: npt.NDArray[np.intp], queries: Floats) -> list[set[int]]:
    scores = queries @ vectors[members].T
    best = np.argpartition(-scores, K - 1, axis=1)[:, :K]
    return [set(members[row].tolist()) for row in best]


Search = Callable[[str, Floats], list[int]]
Figures = tuple[float, float, float]  # p50 ms, p95 ms, recall@150


def measure(search: Search, queries: Floats, vault: str, exact: list[set[int]]) -> Figures:
    times, recalls = [], []
    for query, best in zip(queries, exact, strict=True):
        began = time.perf_counter()
        found = search(vault, query)
        times.append((time.perf_counter() - began) * 1000)
        recalls.append(len(best & set(found)) / K)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95)], statistics.mean(recalls)


def row(name: str, held: int, built: float, save: str, load: str, figures: list[Figures]) -> None:
    (m50, m95, mr), (v50, v95, vr) = figures
    print(
        f"| {name} | {held / 2**20:.0f} | {built:.1f} | {save} | {load} "
        f"| {m50:.1f} / {m95:.1f} | {mr:.3f} | {v50:.1f} / {v95:.1f} | {vr:.3f} |",
        flush=True,
    )


def baseline(
    vectors: Floats, vaults: npt.NDArray[np.int_], queries: Floats, exact: dict[str, list[set[int]]]
) -> None:
    old = ProjectedIndex(DIM)
    built = build(old, vectors, vaults)
    figures = [
        measure(lambda v, q: old.search(v, q, K, SearchFilter()), queries, v, exact[v])
        for v in ("main", "v1")
    ]
    row("projected float32 (8497cf0)", old.nbytes(), built, "-", "-", figures)


def run(size: int, queries_count: int, seed: int, probes: list[int]) -> None:
    lines = Lines(seed)
    began = time.perf_counter()
    vectors = lines.make(size, seed + 1)
    queries = lines.make(queries_count, seed + 2, longest=12)
    vaults = np.random.default_rng(seed + 3).integers(len(VAULTS), size=size)
    print(f"\n{size:,} rows generated in {time.perf_counter() - began:.1f} s", flush=True)
    names = np.array(VAULTS)[vaults]
    exact = {v: truth(vectors, np.flatnonzero(names == v), queries) for v in ("main", "v1")}
    print(
        "| index | MiB held | build s | save s | load s | main p50 / p95 ms "
        "| main recall@150 | v1 p50 / p95 ms | v1 recall@150 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    baseline(vectors, vaults, queries, exact)
    new = VectorIndex(DIM)
    built = build(new, vectors, vaults)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "vectors")
        began = time.perf_counter()
        read = new.state()
        assert read is not None
        snapshot.write(path, read(), {})
        saved = time.perf_counter() - began
        del new, read
        began = time.perf_counter()
        kept = snapshot.read(path, room=size // 8)[0]
        restored = VectorIndex.restored(kept)
        loaded = time.perf_counter() - began
        file_mib = path.stat().st_size / 2**20
    for probed in probes:
        figures = searched(VectorIndex.restored(kept, probed=probed), queries, exact)
        name = f"int8 + lists, {probed} lists' worth (file {file_mib:.0f} MiB)"
        row(name, restored.nbytes(), built, f"{saved:.1f}", f"{loaded:.1f}", figures)


def searched(
    index: VectorIndex, queries: Floats, exact: dict[str, list[set[int]]]
) -> list[Figures]:
    def search(vault: str, query: Floats) -> list[int]:
        return [seq for seq, _ in index.search(vault, query, K, SearchFilter())]

    return [measure(search, queries, v, exact[v]) for v in ("main", "v1")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--probes", default=str(PROBED_LISTS), help="lists' worth read, e.g. 6,10")
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        run(size, args.queries, args.seed, [int(p) for p in args.probes.split(",")])


if __name__ == "__main__":
    main()
