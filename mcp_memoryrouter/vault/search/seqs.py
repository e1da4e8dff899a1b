"""Where each seq's live row sits in a row table, for millions of rows: a mapping kept as two
sorted numpy arrays (12 bytes a row) and a dict of the newest entries, folded into the
arrays once it holds a quarter as many. A plain dict spends ~100 bytes a row on the same.

Seqs mostly arrive in ascending order (SQLite hands out the next one), so an entry past the
arrays' largest seq goes straight to the dict; a removed entry of the arrays is marked
(position -1) until the next fold.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping

import numpy as np
import numpy.typing as npt

_FOLD_FROM = 4096


class SeqPositions(MutableMapping[int, int]):
    def __init__(self) -> None:
        self._seqs = np.zeros(0, dtype=np.int64)  # ascending
        self._positions = np.zeros(0, dtype=np.int32)  # -1: removed
        self._top = -1  # the arrays' largest seq (-1 when empty)
        self._gone = 0  # entries of the arrays marked removed
        self._recent: dict[int, int] = {}

    @classmethod
    def of(cls, seqs: npt.NDArray[np.integer], positions: npt.NDArray[np.integer]) -> SeqPositions:
        """The mapping of ``seqs[i]`` to ``positions[i]`` (distinct seqs, any order)."""
        order = np.argsort(seqs, kind="stable")
        made = cls()
        made._seqs = seqs[order].astype(np.int64)
        made._positions = positions[order].astype(np.int32)
        made._top = int(made._seqs[-1]) if made._seqs.size else -1
        return made

    def _at(self, seq: int) -> int:
        """The index of ``seq`` in the arrays, or -1 when it is not there (or removed)."""
        if seq > self._top:
            return -1
        i = int(np.searchsorted(self._seqs, seq))
        if i < self._seqs.size and self._seqs[i] == seq and self._positions[i] >= 0:
            return i
        return -1

    def __len__(self) -> int:
        return self._seqs.size - self._gone + len(self._recent)

    def __getitem__(self, seq: int) -> int:
        position = self._recent.get(seq)
        if position is not None:
            return position
        i = self._at(seq)
        if i < 0:
            raise KeyError(seq)
        return int(self._positions[i])

    def __setitem__(self, seq: int, position: int) -> None:
        i = self._at(seq)
        if i >= 0:
            self._positions[i] = position
            return
        self._recent[seq] = position
        if len(self._recent) > max(_FOLD_FROM, self._seqs.size // 4):
            self._fold()

    def __delitem__(self, seq: int) -> None:
        if self._recent.pop(seq, None) is not None:
            return
        i = self._at(seq)
        if i < 0:
            raise KeyError(seq)
        self._positions[i] = -1
        self._gone += 1

    def __iter__(self) -> Iterator[int]:
        yield from self._seqs[self._positions >= 0].tolist()
        yield from list(self._recent)

    def _fold(self) -> None:
        kept = self._positions >= 0
        count = len(self._recent)
        seqs = np.concatenate(
            [self._seqs[kept], np.fromiter(self._recent, dtype=np.int64, count=count)]
        )
        positions = np.concatenate(
            [self._positions[kept], np.fromiter(self._recent.values(), np.int32, count)]
        )
        folded = SeqPositions.of(seqs, positions)
        self._seqs, self._positions, self._top = folded._seqs, folded._positions, folded._top
        self._gone, self._recent = 0, {}

    @property
    def nbytes(self) -> int:
        return self._seqs.nbytes + self._positions.nbytes + 100 * len(self._recent)
