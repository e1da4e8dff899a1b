"""An in-memory vector index with metadata masks (numpy).

Rows are appended as the embedding worker stores vectors and dropped when memories are
deleted; a search masks by vault, tier, importance, session and date window, then scores
the survivors (cosine on unit vectors). Masking first keeps every filter exact at any
selectivity, which an approximate graph index does not.

Up to ``APPROXIMATE_FROM`` survivors every one is scored exactly. Beyond, the scan reads a
copy of the vectors projected on their principal directions (a quarter of the dimensions,
so a quarter of the memory a full scan streams), keeps the ``RESCORED`` x k best there and
scores those exactly: returned scores are exact cosines; a true top-k row can be missed
when its projection ranks it below the candidates (LoCoMo questions over LoCoMo turns,
MiniLM: recall@10 99.4% with 80 candidates out of 5,882 rows).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.vault.domain import SearchFilter

_GROW = 1.5
APPROXIMATE_FROM = 20_000  # survivors from which the projected scan pays off
RESCORED = 8  # candidates rescored exactly per wanted row
_FIT_SAMPLE = 20_000  # rows the principal directions are computed from


@dataclass(frozen=True)
class VectorRow:
    seq: int
    vault: str
    tier: int
    importance: int | None
    date_from: int
    date_to: int
    session: str | None


@dataclass(frozen=True)
class Pending:
    """A memory waiting for its vector, and the text the vector is computed from."""

    row: VectorRow
    text: str


class VectorIndex:
    def __init__(self, dim: int, approximate_from: int = APPROXIMATE_FROM) -> None:
        self.dim = dim
        self._approximate_from = approximate_from
        self._lock = threading.Lock()
        self._size = 0
        self._matrix = np.zeros((1024, dim), dtype=np.float32)
        self._basis: npt.NDArray[np.float32] | None = None  # dim x dim // 4, when fitted
        self._projected = np.zeros((0, 0), dtype=np.float32)  # rows on the basis, once fitted
        self._fitted_rows = 0
        self._seq = np.zeros(1024, dtype=np.int64)
        self._vault = np.zeros(1024, dtype=np.int32)
        self._tier = np.zeros(1024, dtype=np.int8)
        self._importance = np.zeros(1024, dtype=np.int16)
        self._from = np.zeros(1024, dtype=np.int64)
        self._to = np.zeros(1024, dtype=np.int64)
        self._session = np.zeros(1024, dtype=np.int32)
        self._alive = np.zeros(1024, dtype=bool)
        self._where: dict[int, int] = {}  # seq -> position
        self._codes: dict[str, int] = {}  # vault ids and session ids -> small ints

    def __len__(self) -> int:
        return len(self._where)

    def _code(self, value: str | None) -> int:
        if value is None:
            return -1
        return self._codes.setdefault(value, len(self._codes))

    def _grow(self, needed: int) -> None:
        capacity = len(self._seq)
        if needed <= capacity:
            return
        new = max(needed, int(capacity * _GROW))
        self._matrix = np.resize(self._matrix, (new, self.dim))
        if self._basis is not None:
            self._projected = np.resize(self._projected, (new, self._basis.shape[1]))
        for name in (
            "_seq",
            "_vault",
            "_tier",
            "_importance",
            "_from",
            "_to",
            "_session",
            "_alive",
        ):
            old = getattr(self, name)
            grown = np.zeros(new, dtype=old.dtype)
            grown[:capacity] = old
            setattr(self, name, grown)

    def add(self, rows: Sequence[VectorRow], vectors: npt.NDArray[np.float32]) -> None:
        with self._lock:
            self._grow(self._size + len(rows))
            positions = []
            for row, vector in zip(rows, vectors, strict=True):
                if row.seq in self._where:
                    position = self._where[row.seq]
                else:
                    position = self._size
                    self._size += 1
                    self._where[row.seq] = position
                positions.append(position)
                self._matrix[position] = vector
                self._seq[position] = row.seq
                self._vault[position] = self._code(row.vault)
                self._tier[position] = row.tier
                self._importance[position] = row.importance or 0
                self._from[position] = row.date_from
                self._to[position] = row.date_to
                self._session[position] = self._code(row.session)
                self._alive[position] = True
            if self._basis is not None and positions:
                self._projected[positions] = self._matrix[positions] @ self._basis

    def remove(self, seqs: Sequence[int]) -> None:
        with self._lock:
            for seq in seqs:
                position = self._where.pop(seq, None)
                if position is not None:
                    self._alive[position] = False

    def remove_vault(self, vault: str) -> None:
        with self._lock:
            code = self._codes.get(vault)
            if code is None:
                return
            hit = np.flatnonzero(self._alive[: self._size] & (self._vault[: self._size] == code))
            for position in hit:
                self._where.pop(int(self._seq[position]), None)
            self._alive[hit] = False

    def search(
        self, vault: str, query: npt.NDArray[np.float32], k: int, where: SearchFilter
    ) -> list[tuple[int, float]]:
        """The ``k`` best (seq, cosine) of the vault's rows that pass the filter."""
        with self._lock:
            code = self._codes.get(vault)
            if code is None or self._size == 0:
                return []
            n = self._size
            mask = self._alive[:n] & (self._vault[:n] == code)
            if where.tiers is not None:
                mask &= np.isin(self._tier[:n], np.array(where.tiers, dtype=np.int8))
            if where.min_importance is not None:
                mask &= self._importance[:n] >= where.min_importance
            if where.session_id is not None:
                session = self._codes.get(where.session_id, -2)
                mask &= (self._tier[:n] > 1) | (self._session[:n] == session)
            if where.window is not None:
                mask &= (self._from[:n] <= where.window[1]) & (self._to[:n] >= where.window[0])
            positions = np.flatnonzero(mask)
            if positions.size == 0:
                return []
            if positions.size >= max(self._approximate_from, k * RESCORED + 1) and self.dim >= 8:
                positions = self._candidates(positions, query, k * RESCORED)
                scores = self._matrix[positions] @ query
            elif positions.size * 4 > n:  # broad filter: one product, no copy of the matrix
                scores = (self._matrix[:n] @ query)[positions]
            else:  # selective filter: score only the survivors
                scores = self._matrix[positions] @ query
            seqs = self._seq[positions]
        top = min(k, scores.size)
        best = np.argpartition(-scores, top - 1)[:top]
        best = best[np.argsort(-scores[best])]
        return [(int(seqs[i]), float(scores[i])) for i in best]

    def _candidates(
        self, positions: npt.NDArray[np.intp], query: npt.NDArray[np.float32], count: int
    ) -> npt.NDArray[np.intp]:
        """The ``count`` positions whose projections score best (caller holds the lock)."""
        basis = self._fit()
        n = self._size
        if positions.size * 4 > n:
            approximate = (self._projected[:n] @ (query @ basis))[positions]
        else:
            approximate = self._projected[positions] @ (query @ basis)
        best: npt.NDArray[np.intp] = positions[np.argpartition(-approximate, count - 1)[:count]]
        return best

    def _fit(self) -> npt.NDArray[np.float32]:
        """The principal directions of the stored vectors, refitted each time the index has
        doubled since the last fit (caller holds the lock)."""
        if self._basis is not None and self._size < 2 * self._fitted_rows:
            return self._basis
        alive = np.flatnonzero(self._alive[: self._size])
        sample = self._matrix[alive[:: max(1, alive.size // _FIT_SAMPLE)]]
        _, directions = np.linalg.eigh(sample.T @ sample)  # ascending eigenvalues
        basis = np.ascontiguousarray(directions[:, ::-1][:, : self.dim // 4], dtype=np.float32)
        self._projected = np.zeros((len(self._seq), basis.shape[1]), dtype=np.float32)
        self._projected[: self._size] = self._matrix[: self._size] @ basis
        self._basis, self._fitted_rows = basis, self._size
        return basis
