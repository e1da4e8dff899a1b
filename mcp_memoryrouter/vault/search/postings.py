"""One vault's BM25 postings in a compact, immutable form (CSR arrays over a sorted vocabulary).

A :class:`Segment` holds, for each token of its :class:`Vocabulary`, the row-table positions
of the rows that hold it (ascending) and how often each holds it, as three flat numpy arrays
(``starts`` indexes ``positions`` and ``counts`` by token), plus each token's largest count
(``peaks``: what bounds the token's contribution to any row's score). Nothing here is a
Python object per token or per posting: a token costs its UTF-8 bytes and ~20 bytes of
arrays, a posting 6 bytes (``uint16`` counts while they fit).

Recent writes go to a :class:`Tail` of growable ``array`` postings, which :meth:`Segment.merged`
folds into a fresh segment; a tail's rows sit at positions after every position of its
segment, so a token's postings are the segment's then the tail's, ascending throughout.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

Positions = npt.NDArray[np.int32]
Counts = npt.NDArray[np.unsignedinteger[Any]]
Part = tuple[Positions, Counts]  # one stretch of a token's postings, ascending positions


class Vocabulary:
    """Sorted tokens as one UTF-8 blob and their end offsets; found by binary search (UTF-8
    byte order is code point order, so the order is ``sorted()``'s)."""

    def __init__(self, blob: bytes, ends: array[int]) -> None:
        self.blob = blob
        self.ends = ends

    @classmethod
    def of(cls, tokens: Sequence[str]) -> Vocabulary:
        encoded = [t.encode() for t in tokens]
        ends = array("q", np.cumsum([len(e) for e in encoded], dtype=np.int64).tobytes())
        return cls(b"".join(encoded), ends)

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, i: int) -> bytes:
        return self.blob[self.ends[i - 1] if i else 0 : self.ends[i]]

    def find(self, token: str) -> int | None:
        key = token.encode()
        at = bisect_left(self, key)
        return at if at < len(self.ends) and self[at] == key else None

    def tokens(self) -> list[str]:
        return [self[i].decode() for i in range(len(self.ends))]

    @property
    def nbytes(self) -> int:
        return len(self.blob) + self.ends.itemsize * len(self.ends)


_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Segment:
    vocabulary: Vocabulary
    starts: npt.NDArray[np.int64]  # token i's postings: [starts[i], starts[i + 1])
    positions: Positions
    counts: Counts
    peaks: Counts  # by token: its largest count

    @classmethod
    def empty(cls) -> Segment:
        return cls.build([], _EMPTY, _EMPTY, _EMPTY)

    @classmethod
    def build(
        cls,
        tokens: Sequence[str],
        ids: npt.NDArray[np.integer[Any]],
        positions: npt.NDArray[np.integer[Any]],
        counts: npt.NDArray[np.integer[Any]],
    ) -> Segment:
        """A segment of ``tokens`` (sorted) from postings ordered by token id, then position;
        tokens left without postings are dropped."""
        starts = np.searchsorted(ids, np.arange(len(tokens) + 1)).astype(np.int64)
        sizes = np.diff(starts)
        if sizes.size and not sizes.all():
            kept = np.flatnonzero(sizes)
            tokens = [tokens[i] for i in kept.tolist()]
            starts = np.concatenate(([0], np.cumsum(sizes[kept]))).astype(np.int64)
        widest = int(counts.max()) if counts.size else 0
        kind = np.uint16 if widest <= np.iinfo(np.uint16).max else np.uint32
        narrow: Counts = counts.astype(kind)
        peaks: Counts = np.maximum.reduceat(narrow, starts[:-1]) if narrow.size else narrow[:0]
        return cls(Vocabulary.of(tokens), starts, positions.astype(np.int32), narrow, peaks)

    def __len__(self) -> int:
        return int(self.positions.size)

    @property
    def nbytes(self) -> int:
        arrays = (self.starts, self.positions, self.counts, self.peaks)
        return self.vocabulary.nbytes + sum(a.nbytes for a in arrays)

    def postings(self, token: str) -> tuple[Part, int] | None:
        """The token's postings (views) and its largest count; None when it has none."""
        at = self.vocabulary.find(token)
        if at is None:
            return None
        a, b = int(self.starts[at]), int(self.starts[at + 1])
        return (self.positions[a:b], self.counts[a:b]), int(self.peaks[at])

    def merged(self, tail: Tail) -> Segment:
        """This segment with the tail's postings added (the tail's positions come after)."""
        if not tail.size:
            return self
        base = self.vocabulary.tokens()
        extra = sorted(set(tail.postings).difference(base))
        # where each extra token lands among the base tokens, and so every token's new id
        lands = np.array([bisect_left(base, t) for t in extra], dtype=np.int64)
        base_ids = np.arange(len(base)) + np.searchsorted(lands, np.arange(len(base)), "right")
        extra_ids = {t: int(at) + j for j, (t, at) in enumerate(zip(extra, lands, strict=True))}
        ids, positions, counts = (
            [np.repeat(base_ids, np.diff(self.starts))],
            [self.positions],
            [self.counts.astype(np.uint32)],
        )
        for token, (at, times) in tail.postings.items():
            known = self.vocabulary.find(token)
            new = extra_ids[token] if known is None else int(base_ids[known])
            ids.append(np.full(len(at), new, dtype=np.int64))
            positions.append(np.frombuffer(at, dtype=np.int32).copy())
            counts.append(np.frombuffer(times, dtype=np.uint32).copy())
        all_ids = np.concatenate(ids)
        order = np.argsort(all_ids, kind="stable")  # a sorted run, then the tail's short ones
        tokens = list(heapq.merge(base, extra))
        return Segment.build(
            tokens, all_ids[order], np.concatenate(positions)[order], np.concatenate(counts)[order]
        )

    def moved(self, moved: npt.NDArray[np.int64]) -> Segment:
        """The segment after a compaction: position p becomes ``moved[p]`` (-1: gone). The
        mapping keeps order, so every token's postings stay ascending."""
        target = moved[self.positions]
        keep = target >= 0
        kept = np.concatenate(([0], np.cumsum(keep))).astype(np.int64)
        sizes = np.diff(kept[self.starts])
        ids = np.repeat(np.arange(sizes.size), sizes)
        return Segment.build(
            self.vocabulary.tokens(), ids, target[keep], self.counts[keep].astype(np.uint32)
        )


@dataclass
class Tail:
    """Postings of the rows added since the segment was built, by token: positions, counts."""

    postings: dict[str, tuple[array[int], array[int]]] = field(default_factory=dict)
    size: int = 0  # postings held

    def add(self, position: int, counts: Iterable[tuple[str, int]]) -> None:
        for token, count in counts:
            lists = self.postings.get(token)
            if lists is None:
                lists = self.postings[token] = (array("i"), array("I"))
            lists[0].append(position)
            lists[1].append(count)
            self.size += 1

    def part(self, token: str) -> tuple[Part, int] | None:
        """The token's postings (copies: a view would pin the growable arrays) and its
        largest count; None when it has none."""
        lists = self.postings.get(token)
        if lists is None:
            return None
        counts = np.array(lists[1], dtype=np.uint32)
        return (np.array(lists[0], dtype=np.int32), counts), int(counts.max())

    @property
    def nbytes(self) -> int:
        return sum(
            a.buffer_info()[1] * a.itemsize + b.buffer_info()[1] * b.itemsize
            for a, b in self.postings.values()
        )
