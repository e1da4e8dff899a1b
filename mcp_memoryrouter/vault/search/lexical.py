"""An in-memory BM25 index over the tokens SQLite's FTS5 produces (numpy).

FTS5 ranks with ``bm25()`` by calling back into the auxiliary-function API for every
matching row, so a common word costs a millisecond per thousand matches (20-30 ms over
the 12k matches of a 100k-memory vault), and its k1 and b are fixed. Here the postings of
each query token are scored in vectorised steps instead, with FTS5's formula (every
column weight 1, IDF floored at 1e-6), its operation order and its (score, seq) order.

The corpus statistics are the searched vault's own: its live rows, their average length,
and how many of them hold each token. Another vault's memories never change a ranking or
a score, so scores reveal nothing about what other vaults hold. With :data:`FTS5_BM25` the
rows and the scores are to the last bit those of FTS5's ``bm25()`` over a table of the
vault's memories alone (a test compares both on random vaults, deletes included). The
store ranks with :data:`BM25`, which normalises length less.

Each vault's postings are a compact segment (:mod:`.postings`) and a tail of recent writes,
merged into a new segment once the tail holds a quarter of the segment. A token's count in
the vault is its postings' length less the vault's dead rows among them, found by binary
search while those are few: no pass over a common word's postings.

**Pruning (MaxScore).** A token adds to any row at most its bound: IDF times the saturation
of its largest count in a row of length 0. Tokens are taken by bound, highest (rarest)
first. A row scores at least what any one of its tokens gives it, so once the k-th largest
gain of a token taken beats the bounds of the tokens not taken added up, a row holding none
of the tokens taken cannot reach the top k (nor tie with it): the rows holding them are the
candidates. Of those, a row whose gains from the tokens looked up so far plus the bounds of
the others stay under the k-th largest of those sums cannot reach the top k either, and is
dropped; the other tokens are looked up one by one, highest bound first, for the candidates
left, dropping again after each (their postings read where they are few or else probed by
binary search per candidate). The rows left are scored exactly, token by token in the
query's order. A common word asked
beside rarer ones then costs at most 16 postings per candidate whatever its count.
:attr:`LexicalIndex.scored` counts the postings read.

**The budget.** Taking tokens stops too when the next one's postings would bring those read
past :data:`CANDIDATE_POSTINGS` (the first token is always taken): the commoner tokens then
only score the rows the rarer ones found, and a row holding only common words is no
candidate. Below the budget the answer is exact; past it (a question of common words only,
in a vault of hundreds of thousands of rows) the cost stops growing with how many rows hold
those words, and every row returned still has its exact score.

Tokens come from FTS5's own tokenizer (the store tokenizes with an in-memory FTS5
table), so this module never stems or splits text itself. Deleted rows stay in the
postings as dead positions, masked out and no longer counted; the index compacts itself
when dead positions outnumber live ones.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.vault.rules.domain import SearchFilter
from mcp_memoryrouter.vault.search.postings import Part, Segment, Tail
from mcp_memoryrouter.vault.search.rowtable import IndexRow, RowTable

Rows = npt.NDArray[np.integer[Any]]  # positions in the row table


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
_MERGE_FROM = 65_536  # tail postings tolerated before a merge is considered
_MERGE_SHARE = 4  # ... and the tail merges once it holds a quarter of the segment's postings
_SLACK = 1e-9  # relative: what rounding may add to a sum of bounds
_UNFILTERED = SearchFilter()
# Postings read to find the candidates: the rarest token's whatever their number, then rarer
# before commoner while the sum stays within this; past it, the commoner tokens only score
# the rows the rarer ones found (the module's docstring, "The budget").
CANDIDATE_POSTINGS = 65_536
_PROBE_SHARE = 16  # dead rows counted by binary search while 16 of them cost less than a pass


@dataclass(frozen=True)
class LexicalDoc:
    """A memory as the index sees it: its row, and how often each token occurs in it."""

    row: IndexRow
    counts: Mapping[str, int]

    @property
    def length(self) -> int:
        return sum(self.counts.values())


@dataclass
class _Vault:
    """One vault's postings and statistics (BM25's N and total length)."""

    segment: Segment = field(default_factory=Segment.empty)
    tail: Tail = field(default_factory=Tail)
    dead: list[int] = field(default_factory=list)  # positions deleted since the last compaction
    rows: int = 0
    tokens: int = 0

    def parts(self, token: str) -> tuple[list[Part], int]:
        """The token's postings (segment, then tail) and its largest count."""
        parts, peak = [], 0
        for found in (self.segment.postings(token), self.tail.part(token)):
            if found is not None:
                parts.append(found[0])
                peak = max(peak, found[1])
        return parts, peak

    def merge_if_due(self) -> None:
        if self.tail.size > max(_MERGE_FROM, len(self.segment) // _MERGE_SHARE):
            self.segment, self.tail = self.segment.merged(self.tail), Tail()


@dataclass(frozen=True)
class _Term:
    parts: list[Part]
    hits: int  # the vault's live rows that hold the token
    dead: bool  # whether some of the postings are dead rows
    idf: float
    bound: float  # no row gains more than this from one occurrence of the token in the query

    @property
    def postings(self) -> int:
        return sum(p.size for p, _ in self.parts)


class LexicalIndex:
    def __init__(self, params: Bm25 = BM25, budget: int = CANDIDATE_POSTINGS) -> None:
        self.params = params
        self.budget = budget  # postings read to find candidates, past the first token
        self._lock = threading.Lock()
        self._rows = RowTable()
        self._length = np.zeros(self._rows.capacity, dtype=np.uint32)
        self._vaults: dict[int, _Vault] = {}  # by vault code
        self.scored = 0  # postings read to score, over every search so far
        self.changes = 0  # rows added or dropped so far
        self._buffer = np.zeros(0, dtype=np.float64)
        self._marks = np.zeros(0, dtype=np.bool_)

    def __len__(self) -> int:
        return self._rows.live

    @property
    def nbytes(self) -> int:
        """Bytes of postings and per-row arrays (the row table's ``where`` dict aside)."""
        rows = sum(c.nbytes for c in self._rows.columns.values()) + self._length.nbytes
        return rows + sum(v.segment.nbytes + v.tail.nbytes for v in self._vaults.values())

    def add(self, docs: Iterable[LexicalDoc]) -> None:
        with self._lock:
            touched = {id(v): v for v in (self._add(doc) for doc in docs)}
            for vault in touched.values():
                vault.merge_if_due()

    def _add(self, doc: LexicalDoc) -> _Vault:
        table = self._rows
        self._drop(doc.row.seq)
        if table.reserve(table.size + 1):
            grown = np.zeros(table.capacity, dtype=np.uint32)
            grown[: self._length.size] = self._length
            self._length = grown
        position = table.put(doc.row)
        self.changes += 1
        self._length[position] = doc.length
        vault = self._vault_at(position)
        vault.tail.add(position, doc.counts.items())
        vault.rows += 1
        vault.tokens += doc.length
        return vault

    def _vault_at(self, position: int) -> _Vault:
        code = int(self._rows.columns["vault"][position])
        vault = self._vaults.get(code)
        if vault is None:
            vault = self._vaults[code] = _Vault()
        return vault

    def remove(self, seqs: Iterable[int]) -> None:
        with self._lock:
            for seq in seqs:
                self._drop(seq)
            if self._rows.size - self._rows.live > max(_COMPACT_FROM, self._rows.live):
                self._compact()

    def _drop(self, seq: int) -> None:
        position = self._rows.drop(seq)
        if position is not None:
            self.changes += 1
            vault = self._vault_at(position)
            vault.rows -= 1
            vault.tokens -= int(self._length[position])
            vault.dead.append(position)

    def _compact(self) -> None:
        """Rebuild on the live rows only (caller holds the lock); vault codes stay."""
        rows = self._rows
        alive = np.flatnonzero(rows.columns["alive"][: rows.size])
        moved = np.full(rows.size, -1, dtype=np.int64)
        moved[alive] = np.arange(alive.size)
        for code, vault in list(self._vaults.items()):
            if not vault.rows:
                del self._vaults[code]
                continue
            vault.segment = vault.segment.merged(vault.tail).moved(moved)
            vault.tail, vault.dead = Tail(), []
        length = np.zeros(max(1024, alive.size), dtype=np.uint32)
        length[: alive.size] = self._length[alive]
        self._rows, self._length = rows.compacted(alive), length

    def seqs(self) -> npt.NDArray[np.int64]:
        """The seqs of the rows held, in position order."""
        with self._lock:
            n, columns = self._rows.size, self._rows.columns
            seqs: npt.NDArray[np.int64] = columns["seq"][:n][columns["alive"][:n]]
            return seqs

    def remove_vault(self, vault: str) -> None:
        with self._lock:
            positions = self._rows.vault_positions(vault)
            seqs = self._rows.columns["seq"][positions].tolist()
        self.remove(seqs)

    def _vault(self, vault: str) -> _Vault | None:
        code = self._rows.code_of(vault)
        return None if code is None else self._vaults.get(code)

    def doc_freqs(self, vault: str, tokens: Iterable[str]) -> tuple[dict[str, int], int]:
        """How many of the vault's memories hold each token, and how many it holds."""
        with self._lock:
            state = self._vault(vault)
            if state is None:
                return {}, 0
            freqs = {}
            for token in tokens:
                term = self._term(state, token)
                freqs[token] = 0 if term is None else term.hits
            return freqs, state.rows

    def _term(self, vault: _Vault, token: str) -> _Term | None:
        """The token's postings in the vault and its statistics; None when no live row of
        the vault holds it."""
        parts, peak = vault.parts(token)
        dead = self._dead_among(vault, parts)
        hits = sum(p.size for p, _ in parts) - dead
        if not hits:
            return None
        idf = math.log((vault.rows - hits + 0.5) / (hits + 0.5))
        if idf <= 0.0:
            idf = 1e-6
        k1, b = self.params.k1, self.params.b
        # BM25's saturation grows with the count and falls with the row's length (>= 0)
        bound = idf * (peak * (k1 + 1.0)) / (peak + k1 * (1 - b))
        return _Term(parts, hits, dead > 0, idf, bound)

    def _dead_among(self, vault: _Vault, parts: list[Part]) -> int:
        """How many of the postings are dead rows: O(min(postings, dead * log postings))."""
        if not vault.dead or not parts:
            return 0
        total = sum(p.size for p, _ in parts)
        if len(vault.dead) * _PROBE_SHARE >= total:
            alive = self._rows.columns["alive"]
            return total - sum(int(np.count_nonzero(alive[p])) for p, _ in parts)
        dead = np.array(vault.dead, dtype=np.int32)
        found = 0
        for positions, _ in parts:
            at = np.minimum(np.searchsorted(positions, dead), positions.size - 1)
            found += int(np.count_nonzero(positions[at] == dead))
        return found

    def search(
        self, vault: str, tokens: Sequence[str | None], k: int, where: SearchFilter
    ) -> list[tuple[int, float]]:
        """The ``k`` best (seq, BM25 score) of the vault's rows that pass the filter and hold
        any of the tokens, best first, ties by seq. ``tokens`` is one entry per query word
        (None for a word without a token); a token given twice counts twice, as in FTS5.
        The statistics are the vault's, whatever the filter."""
        with self._lock:
            state = self._vault(vault)
            if state is None or state.rows == 0 or k <= 0:
                return []
            terms: dict[str, _Term] = {}
            for token in dict.fromkeys(t for t in tokens if t is not None):
                term = self._term(state, token)
                if term is not None:
                    terms[token] = term
            if not terms:
                return []
            query = [t for t in tokens if t is not None and t in terms]
            return self._top(terms, query, state.tokens / state.rows, k, where)

    def _top(
        self,
        terms: dict[str, _Term],
        query: list[str],
        average: float,
        k: int,
        where: SearchFilter,
    ) -> list[tuple[int, float]]:
        """MaxScore: take tokens by bound until the k-th largest gain of one of them beats
        what the rest could add to a row that holds none of the tokens taken, or until the
        next token's postings would pass the budget; keep the rows holding tokens taken
        that the rest could still lift into the k best; score those, token by token in the
        query's order as FTS5 adds."""
        times = Counter(query)
        ranked = sorted(terms, key=lambda t: -terms[t].bound * times[t])
        rest = [0.0] * (len(ranked) + 1)
        for j in range(len(ranked) - 1, -1, -1):
            rest[j] = rest[j + 1] + terms[ranked[j]].bound * times[ranked[j]]
        taken: dict[str, tuple[Rows, npt.NDArray[np.float64]]] = {}
        floor, read = 0.0, 0  # k rows of the candidates score at least ``floor``
        for j, token in enumerate(ranked, start=1):
            at, gain = taken[token] = self._gains(terms[token], average, where)
            read += terms[token].postings
            if j == len(ranked) or read + terms[ranked[j]].postings > self.budget:
                break
            if gain.size >= k:  # a row scores at least what one of its tokens gives it
                floor = max(floor, np.partition(gain, gain.size - k)[gain.size - k] * times[token])
                if floor > rest[j] * (1.0 + _SLACK):
                    break
        self.scored += read
        buffer, marks = self._partial(), self._marks  # zero and False outside a search
        found = self._union(taken)
        looked = dict(taken)  # each token's rows among the candidates, and its gains there
        try:
            partial = self._sums(found, taken, times)
            found, partial = _liftable(found, partial, rest[len(taken)], k)
            for j in range(len(taken), len(ranked)):  # the rest, highest bound first
                token = ranked[j]
                marks[found] = True
                try:
                    looked[token] = self._probe(found, terms[token], average)
                finally:
                    marks[found] = False
                partial += self._sums(found, {token: looked[token]}, times)
                found, partial = _liftable(found, partial, rest[j + 1], k)
            marks[found] = True
            for token in query:  # FTS5's order of addition: the same doubles
                at, gain = looked[token]
                hit = marks[at]
                buffer[at[hit]] += gain[hit]
            scores = buffer[found]
        finally:
            buffer[found] = 0.0
            marks[found] = False
        return self._best(found, scores, k)

    def _sums(
        self,
        found: Rows,
        looked: dict[str, tuple[Rows, npt.NDArray[np.float64]]],
        times: Counter[str],
    ) -> npt.NDArray[np.float64]:
        """What the tokens ``looked`` up give each row of ``found`` (0 where a row holds none
        of them), a token asked twice counted twice."""
        if len(looked) == 1:
            [(token, (at, gain))] = looked.items()
            if at is found:  # the candidates are that token's rows
                return gain * times[token]
        buffer = self._buffer
        try:
            for token, (at, gain) in looked.items():
                buffer[at] += gain * times[token]
            sums: npt.NDArray[np.float64] = buffer[found]
        finally:
            for at, _ in looked.values():
                buffer[at] = 0.0
        return sums

    def _union(self, taken: dict[str, tuple[Rows, npt.NDArray[np.float64]]]) -> Rows:
        """The rows holding any token taken, each once (:attr:`_marks` left False)."""
        if len(taken) == 1:
            [(at, _)] = taken.values()
            return at
        marks, parts = self._marks, []
        try:
            for at, _ in taken.values():
                parts.append(at[~marks[at]])
                marks[parts[-1]] = True
        finally:
            for rows in parts:
                marks[rows] = False
        return np.concatenate(parts)

    def _partial(self) -> npt.NDArray[np.float64]:
        """A zeroed buffer of a float per position, kept between searches (under the lock),
        and beside it :attr:`_marks` (False throughout outside a search)."""
        if self._buffer.size < self._rows.size:
            self._buffer = np.zeros(self._rows.capacity, dtype=np.float64)
            self._marks = np.zeros(self._rows.capacity, dtype=np.bool_)
        return self._buffer

    def _gains(
        self, term: _Term, average: float, where: SearchFilter
    ) -> tuple[Rows, npt.NDArray[np.float64]]:
        """The live rows passing the filter that hold the token, and what it adds to each."""
        if len(term.parts) == 1:
            at, counts = term.parts[0]
        else:
            at = np.concatenate([p for p, _ in term.parts])
            counts = np.concatenate([c for _, c in term.parts])
        if term.dead:
            keep = self._rows.columns["alive"][at]
            at, counts = at[keep], counts[keep]
        if where != _UNFILTERED:
            keep = self._rows.passing_at(at, where)
            at, counts = at[keep], counts[keep]
        return at, self._gain(term, counts, at, average)

    def _probe(
        self, found: Rows, term: _Term, average: float
    ) -> tuple[Rows, npt.NDArray[np.float64]]:
        """The rows at ``found`` (marked in :attr:`_marks`) that hold the token, and what it
        adds to each: a pass over the token's postings while that is cheaper than a binary
        search per row, else the binary searches."""
        rows, gains = [], []
        for positions, counts in term.parts:
            if positions.size < found.size * _PROBE_SHARE:
                hit = self._marks[positions]
                rows.append(positions[hit])
                gains.append(self._gain(term, counts[hit], rows[-1], average))
                self.scored += positions.size
                continue
            at = np.minimum(np.searchsorted(positions, found), positions.size - 1)
            hit = positions[at] == found
            rows.append(found[hit])
            gains.append(self._gain(term, counts[at[hit]], found[hit], average))
            self.scored += found.size
        if len(rows) == 1:
            return rows[0], gains[0]
        return np.concatenate(rows), np.concatenate(gains)

    def _gain(
        self,
        term: _Term,
        counts: npt.NDArray[np.unsignedinteger[Any]],
        at: Rows,
        average: float,
    ) -> npt.NDArray[np.float64]:
        k1, b = self.params.k1, self.params.b
        freq = counts.astype(np.float64)
        size = self._length[at].astype(np.float64)
        # FTS5's own expression and order of operations: the same doubles
        denominator = freq + k1 * (1 - b + b * size / average)
        gain: npt.NDArray[np.float64] = term.idf * ((freq * (k1 + 1.0)) / denominator)
        return gain

    def _best(
        self, found: Rows, scores: npt.NDArray[np.float64], k: int
    ) -> list[tuple[int, float]]:
        if found.size > k:  # keep the k best, and every row tied with the k-th
            floor = np.partition(scores, found.size - k)[found.size - k]
            kept = scores >= floor
            found, scores = found[kept], scores[kept]
        seqs = self._rows.columns["seq"][found]
        order = np.lexsort((seqs, -scores))[:k]
        return list(zip(seqs[order].tolist(), scores[order].tolist(), strict=True))

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
        ids: dict[str, int] = {}
        token_chunks, seq_chunks = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for chunk in occurrences:
            token_chunks.append(
                np.fromiter((ids.setdefault(t, len(ids)) for t, _ in chunk), np.int64, len(chunk))
            )
            seq_chunks.append(np.fromiter((seq for _, seq in chunk), np.int64, len(chunk)))
        tokens = sorted(ids)
        rank = np.zeros(len(ids), dtype=np.int64)
        rank[[ids[t] for t in tokens]] = np.arange(len(tokens))
        del ids
        where = np.searchsorted(table.columns["seq"][: table.size], np.concatenate(seq_chunks))
        lengths = np.bincount(where, minlength=table.size)
        index._length = np.zeros(table.capacity, dtype=np.uint32)
        index._length[: table.size] = lengths
        codes = table.columns["vault"][: table.size].astype(np.int64)
        n, v = max(table.size, 1), max(len(tokens), 1)
        # by vault, then token (sorted), then position; the count of each (token, row) pair
        keys = (codes[where] * v + rank[np.concatenate(token_chunks)]) * n + where
        del token_chunks, seq_chunks, where
        keys, counts = _runs(np.sort(keys))
        vault_of = keys // (v * n)
        bounds = np.searchsorted(vault_of, np.arange(int(codes.max(initial=-1)) + 2))
        for code in np.flatnonzero(np.diff(bounds)).tolist():
            a, b = int(bounds[code]), int(bounds[code + 1])
            token_of = (keys[a:b] // n) % v
            present, sizes = _runs(token_of)
            local = np.repeat(np.arange(present.size), sizes)
            segment = Segment.build(
                [tokens[t] for t in present.tolist()], local, keys[a:b] % n, counts[a:b]
            )
            index._vaults[code] = _Vault(segment=segment)
        tokens_by = np.bincount(codes, weights=lengths).astype(np.int64)
        for code, size in enumerate(np.bincount(codes).tolist()):
            if size:
                vault = index._vaults.setdefault(code, _Vault())
                vault.rows, vault.tokens = size, int(tokens_by[code])
        return index


def _liftable(
    found: Rows, partial: npt.NDArray[np.float64], rest: float, k: int
) -> tuple[Rows, npt.NDArray[np.float64]]:
    """The rows of ``found`` that may still be among the k best, and their ``partial`` sums:
    what the tokens looked up give a row, plus ``rest`` (the bounds of the others), reaches
    the k-th largest of those sums. A row below it can neither be among the k best nor tie
    with the k-th, so no other token is looked up for it."""
    if found.size <= k:
        return found, partial
    least = np.partition(partial, found.size - k)[found.size - k]
    keep = partial + rest * (1.0 + _SLACK) >= least
    return found[keep], partial[keep]


def _runs(ordered: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Each distinct value of an ascending array and how many times it occurs (what
    ``np.unique`` returns, without the hashing numpy 2 does first: seconds at 1M rows)."""
    first = np.ones(ordered.size, dtype=np.bool_)
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    return ordered[starts], np.diff(np.append(starts, ordered.size))
