"""An in-memory BM25 index over the tokens SQLite's FTS5 produces (numpy).

FTS5 ranks with ``bm25()`` by calling back into the auxiliary-function API for every
matching row, so a common word costs a millisecond per thousand matches (20-30 ms over
the 12k matches of a 100k-memory vault), and its k1 and b are fixed. Here the postings of
each query token are scored in one vectorised step instead, with FTS5's formula (every
column weight 1, IDF floored at 1e-6), its operation order and its (score, seq) order.

The corpus statistics are the searched vault's own: its live rows, their average length,
and how many of them hold each token (the token's postings among the vault's rows, which
scoring reads anyway). Another vault's memories never change a ranking or a score, so
scores reveal nothing about what other vaults hold. With :data:`FTS5_BM25` the rows and
the scores are to the last bit those of FTS5's ``bm25()`` over a table of the vault's
memories alone (a test compares both on random vaults, deletes included). The store
ranks with :data:`BM25`, which normalises length less.

Tokens come from FTS5's own tokenizer (the store tokenizes with an in-memory FTS5
table), so this module never stems or splits text itself. Deleted rows stay in the
postings as dead positions, masked out and no longer counted; the index compacts itself
when dead positions outnumber live ones.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.vault.rules.domain import SearchFilter
from mcp_memoryrouter.vault.search.rowtable import IndexRow, RowTable


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
        # by vault code: live rows, and tokens over them (BM25's N and average length)
        self._vault_rows: dict[int, int] = {}
        self._vault_tokens: dict[int, int] = {}

    def __len__(self) -> int:
        return self._rows.live

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
        self._length[position] = doc.length
        for token, count in doc.counts.items():
            at = self._id(token)
            self._postings[at][0].append(position)
            self._postings[at][1].append(count)
        self._count(position, 1)

    def _count(self, position: int, sign: int) -> None:
        """Count the row at ``position`` in (1) or out of (-1) its vault's statistics."""
        code = int(self._rows.columns["vault"][position])
        self._vault_rows[code] = self._vault_rows.get(code, 0) + sign
        tokens = self._vault_tokens.get(code, 0) + sign * int(self._length[position])
        self._vault_tokens[code] = tokens

    def _id(self, token: str) -> int:
        at = self._ids.get(token)
        if at is None:
            at = self._ids[token] = len(self._postings)
            self._postings.append((array("i"), array("I")))
        return at

    def remove(self, seqs: Iterable[int]) -> None:
        with self._lock:
            for seq in seqs:
                self._drop(seq)
            if self._rows.size - self._rows.live > max(_COMPACT_FROM, self._rows.live):
                self._compact()

    def _drop(self, seq: int) -> None:
        position = self._rows.drop(seq)
        if position is not None:
            self._count(position, -1)

    def _compact(self) -> None:
        """Rebuild on the live rows only (caller holds the lock); vault codes stay."""
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
        length = np.zeros(max(1024, alive.size), dtype=np.float64)
        length[: alive.size] = self._length[alive]
        self._rows, self._length = rows.compacted(alive), length

    def remove_vault(self, vault: str) -> None:
        with self._lock:
            positions = self._rows.vault_positions(vault)
            seqs = self._rows.columns["seq"][positions].tolist()
        self.remove(seqs)

    def doc_freqs(self, vault: str, tokens: Iterable[str]) -> tuple[dict[str, int], int]:
        """How many of the vault's memories hold each token, and how many it holds."""
        with self._lock:
            rows = self._rows.in_vault(vault)
            if rows is None:
                return {}, 0
            freqs = {token: self._postings_in(token, rows)[2] for token in tokens}
            return freqs, self._totals(vault)[0]

    def _totals(self, vault: str) -> tuple[int, int]:
        """The vault's live rows, and the tokens they hold."""
        code = self._rows.code_of(vault)
        if code is None:
            return 0, 0
        return self._vault_rows.get(code, 0), self._vault_tokens.get(code, 0)

    def _postings_in(
        self, token: str | None, rows: npt.NDArray[np.bool_]
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint32], int]:
        """The token's postings (positions, counts) among ``rows`` (a mask over positions),
        and how many there are: O(the token's postings)."""
        known = None if token is None else self._ids.get(token)
        if known is None:
            return _NO_POSITIONS, _NO_COUNTS, 0
        positions, counts = self._postings[known]
        at = np.frombuffer(positions, dtype=np.int32)
        freq = np.frombuffer(counts, dtype=np.uint32)
        mine = rows[at]
        hits = int(np.count_nonzero(mine))
        if hits == at.size:  # copies: a view left alive would stop the arrays from growing
            return at.copy(), freq.copy(), hits
        return at[mine], freq[mine], hits

    def search(
        self, vault: str, tokens: Sequence[str | None], k: int, where: SearchFilter
    ) -> list[tuple[int, float]]:
        """The ``k`` best (seq, BM25 score) of the vault's rows that pass the filter and hold
        any of the tokens, best first, ties by seq. ``tokens`` is one entry per query word
        (None for a word without a token); a token given twice counts twice, as in FTS5.
        The statistics are the vault's, whatever the filter."""
        with self._lock:
            in_vault, (rows, total) = self._rows.in_vault(vault), self._totals(vault)
            if in_vault is None or rows == 0:
                return []
            scores = self._scores(in_vault, rows, total / rows, tokens)
            return self._best(scores, self._rows.passing(in_vault, where), k)

    def _scores(
        self,
        in_vault: npt.NDArray[np.bool_],
        rows: int,
        average: float,
        tokens: Sequence[str | None],
    ) -> npt.NDArray[np.float64]:
        """BM25 over the vault's own statistics: ``rows`` live rows of ``average`` length."""
        k1, b = self.params.k1, self.params.b
        scores = np.zeros(self._rows.size, dtype=np.float64)
        for token in tokens:
            at, counts, hits = self._postings_in(token, in_vault)
            if not hits:
                continue
            idf = math.log((rows - hits + 0.5) / (hits + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            freq = counts.astype(np.float64)
            size = self._length[at]
            # FTS5's own expression and order of operations: the same doubles
            denominator = freq + k1 * (1 - b + b * size / average)
            scores[at] += idf * ((freq * (k1 + 1.0)) / denominator)
        return scores

    def _best(
        self, scores: npt.NDArray[np.float64], mask: npt.NDArray[np.bool_], k: int
    ) -> list[tuple[int, float]]:
        seqs = self._rows.columns["seq"][: self._rows.size]
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
        lengths = np.bincount(where, minlength=table.size)
        index._length = np.zeros(table.capacity, dtype=np.float64)
        index._length[: table.size] = lengths
        bounds = np.searchsorted(token_of, np.arange(len(ids) + 1))
        positions32, counts32 = position_of.astype(np.int32), counts.astype(np.uint32)
        index._postings = [
            (array("i", positions32[a:b].tobytes()), array("I", counts32[a:b].tobytes()))
            for a, b in pairwise(bounds)
        ]
        codes = table.columns["vault"][: table.size]
        tokens_by = np.bincount(codes, weights=lengths, minlength=0).astype(np.int64)
        for code, size in enumerate(np.bincount(codes).tolist()):
            if size:
                index._vault_rows[code] = size
                index._vault_tokens[code] = int(tokens_by[code])
        return index


_NO_POSITIONS = np.zeros(0, dtype=np.int32)
_NO_COUNTS = np.zeros(0, dtype=np.uint32)
