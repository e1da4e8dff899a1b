"""An in-memory BM25 index over the tokens SQLite's FTS5 produces (numpy).

FTS5 ranks with ``bm25()`` by calling back into the auxiliary-function API for every
matching row, so a common word costs a millisecond per thousand matches (20-30 ms over
the 12k matches of a 100k-memory vault), and its k1 and b are fixed. Here the postings of
each query token are scored in one vectorised step instead, with FTS5's formula (every
column weight 1, IDF floored at 1e-6), its corpus statistics (every row of every vault),
its operation order and its (score, seq) order: with :data:`FTS5_BM25` the rows and the
scores are FTS5's own to the last bit (a test compares both on random vaults, deletes
included). The store ranks with :data:`BM25`, which normalises length less.

Tokens come from FTS5's own tokenizer (the store tokenizes with an in-memory FTS5
table), so this module never stems or splits text itself. Deleted rows stay in the
postings as dead positions, masked out and no longer counted in the statistics; the
index compacts itself when dead positions outnumber live ones.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from mcp_memoryrouter.vault.domain import SearchFilter
from mcp_memoryrouter.vault.rowtable import IndexRow, RowTable


@dataclass(frozen=True)
class Bm25:
    """BM25's term-frequency saturation (k1) and length normalisation (b)."""

    k1: float
    b: float


FTS5_BM25 = Bm25(1.2, 0.75)  # what FTS5's bm25() uses (and Lucene's default)
# Chosen on LoCoMo with both halves checked apart (docs/benchmarks.md): memories are short,
# and a turn is not less relevant for being long, so length is normalised less than FTS5 does.
BM25 = Bm25(0.9, 0.3)
_COMPACT_FROM = 4096  # dead positions tolerated before a compaction is considered


@dataclass(frozen=True)
class LexicalDoc:
    """A memory as the index sees it: its row, and how often each token occurs in it."""

    row: IndexRow
    counts: Mapping[str, int]

    @property
    def length(self) -> int:
        return sum(self.counts.values())


class LexicalIndex:
    def __init__(self, params: Bm25 = BM25) -> None:
        self.params = params
        self._lock = threading.Lock()
        self._rows = RowTable()
        self._length = np.zeros(self._rows.capacity, dtype=np.float64)
        self._ids: dict[str, int] = {}  # token -> id
        self._postings: list[tuple[array[int], array[int]]] = []  # by id: positions, counts
        self._doc_freq: list[int] = []  # by id: live rows holding the token
        self._doc_tokens = array("i")  # every position's distinct token ids, one after another
        self._doc_start = array("q", [0])  # where each position's ids start (and end)
        self._total = 0  # tokens over live rows

    def __len__(self) -> int:
        return self._rows.live

    def doc_freq(self, token: str) -> int:
        at = self._ids.get(token)
        return 0 if at is None else self._doc_freq[at]

    def add(self, docs: Iterable[LexicalDoc]) -> None:
        with self._lock:
            for doc in docs:
                self._add(doc)

    def _add(self, doc: LexicalDoc) -> None:
        table = self._rows
        self._drop(doc.row.seq)
        if table.reserve(table.size + 1):
            self._length = np.resize(self._length, table.capacity)
        position = table.put(doc.row)
        length = doc.length
        self._length[position] = length
        for token, count in doc.counts.items():
            at = self._id(token)
            self._postings[at][0].append(position)
            self._postings[at][1].append(count)
            self._doc_freq[at] += 1
            self._doc_tokens.append(at)
        self._doc_start.append(len(self._doc_tokens))
        self._total += length

    def _id(self, token: str) -> int:
        at = self._ids.get(token)
        if at is None:
            at = self._ids[token] = len(self._postings)
            self._postings.append((array("i"), array("I")))
            self._doc_freq.append(0)
        return at

    def remove(self, seqs: Iterable[int]) -> None:
        with self._lock:
            for seq in seqs:
                self._drop(seq)
            if self._rows.size - self._rows.live > max(_COMPACT_FROM, self._rows.live):
                self._compact()

    def _drop(self, seq: int) -> None:
        position = self._rows.drop(seq)
        if position is None:
            return
        start, end = self._doc_start[position], self._doc_start[position + 1]
        for at in self._doc_tokens[start:end]:
            self._doc_freq[at] -= 1
        self._total -= int(self._length[position])

    def _compact(self) -> None:
        """Rebuild on the live rows only (caller holds the lock)."""
        rows = self._rows
        alive = np.flatnonzero(rows.columns["alive"][: rows.size])
        moved = np.full(rows.size, -1, dtype=np.int64)
        moved[alive] = np.arange(alive.size)
        postings = []
        for positions, counts in self._postings:
            target = moved[np.frombuffer(positions, dtype=np.int32)]
            keep = target >= 0
            kept_counts = np.frombuffer(counts, dtype=np.uint32)[keep]
            postings.append(
                (
                    array("i", target[keep].astype(np.int32).tobytes()),
                    array("I", kept_counts.tobytes()),
                )
            )
        self._postings = postings
        starts = np.frombuffer(self._doc_start, dtype=np.int64)
        sizes = np.diff(starts)[alive]
        flat = np.frombuffer(self._doc_tokens, dtype=np.int32)
        owner = np.repeat(np.arange(rows.size), np.diff(starts))
        self._doc_tokens = array("i", flat[moved[owner] >= 0].tobytes())
        self._doc_start = array("q", np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))
        length = np.zeros(max(1024, alive.size), dtype=np.float64)
        length[: alive.size] = self._length[alive]
        self._rows, self._length = rows.compacted(alive), length

    def remove_vault(self, vault: str) -> None:
        with self._lock:
            positions = self._rows.vault_positions(vault)
            seqs = self._rows.columns["seq"][positions].tolist()
        self.remove(seqs)

    def search(
        self, vault: str, tokens: Sequence[str | None], k: int, where: SearchFilter
    ) -> list[tuple[int, float]]:
        """The ``k`` best (seq, BM25 score) of the vault's rows that pass the filter and hold
        any of the tokens, best first, ties by seq. ``tokens`` is one entry per query word
        (None for a word without a token); a token given twice counts twice, as in FTS5."""
        with self._lock:
            mask = self._rows.mask(vault, where)
            rows = self._rows.live
            if mask is None or rows == 0:
                return []
            n = self._rows.size
            scores = np.zeros(n, dtype=np.float64)
            average = self._total / rows
            for token in tokens:
                known = None if token is None else self._ids.get(token)
                if known is None or not self._doc_freq[known]:
                    continue
                hits = self._doc_freq[known]
                idf = math.log((rows - hits + 0.5) / (hits + 0.5))
                if idf <= 0.0:
                    idf = 1e-6
                positions, counts = self._postings[known]
                # copies: a view left alive would stop the arrays from growing
                at = np.frombuffer(positions, dtype=np.int32).copy()
                freq = np.frombuffer(counts, dtype=np.uint32).astype(np.float64)
                size = self._length[at]
                # FTS5's own expression and order of operations: the same doubles
                k1, b = self.params.k1, self.params.b
                denominator = freq + k1 * (1 - b + b * size / average)
                scores[at] += idf * ((freq * (k1 + 1.0)) / denominator)
            seqs = self._rows.columns["seq"][:n]
            found = np.flatnonzero(mask & (scores > 0.0))
            if found.size > k:  # keep the k best, and every row tied with the k-th
                floor = np.partition(scores[found], found.size - k)[found.size - k]
                found = found[scores[found] >= floor]
            order = np.lexsort((seqs[found], -scores[found]))[:k]
            best = found[order]
            return list(zip(seqs[best].tolist(), scores[best].tolist(), strict=True))

    @classmethod
    def bulk(
        cls,
        rows: Iterable[IndexRow],
        occurrences: Iterable[Sequence[tuple[str, int]]],
        params: Bm25 = BM25,
    ) -> LexicalIndex:
        """An index over ``rows`` (ascending seq) from chunks of (token, seq) pairs, one pair
        per token occurrence, built column-wise: what loading a large vault needs."""
        index = cls(params)
        table = index._rows
        for row in rows:
            table.reserve(table.size + 1)
            table.put(row)
        ids = index._ids
        token_chunks, seq_chunks = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for chunk in occurrences:
            token_chunks.append(
                np.fromiter((ids.setdefault(t, len(ids)) for t, _ in chunk), np.int64, len(chunk))
            )
            seq_chunks.append(np.fromiter((seq for _, seq in chunk), np.int64, len(chunk)))
        token_ids = np.concatenate(token_chunks)
        ordered = table.columns["seq"][: table.size]
        where = np.searchsorted(ordered, np.concatenate(seq_chunks))
        n = max(table.size, 1)
        pairs, counts = np.unique(token_ids * n + where, return_counts=True)  # by token, then row
        token_of, position_of = pairs // n, pairs % n
        index._length = np.zeros(table.capacity, dtype=np.float64)
        index._length[: table.size] = np.bincount(where, minlength=table.size)
        bounds = np.searchsorted(token_of, np.arange(len(ids) + 1))
        positions32, counts32 = position_of.astype(np.int32), counts.astype(np.uint32)
        index._postings = [
            (array("i", positions32[a:b].tobytes()), array("I", counts32[a:b].tobytes()))
            for a, b in pairwise(bounds)
        ]
        index._doc_freq = np.diff(bounds).tolist()
        by_row = np.lexsort((token_of, position_of))
        index._doc_tokens = array("i", token_of[by_row].astype(np.int32).tobytes())
        per_row = np.bincount(position_of, minlength=table.size)
        index._doc_start = array("q", np.concatenate([[0], np.cumsum(per_row)]).astype(np.int64))
        index._total = int(token_ids.size)
        return index
