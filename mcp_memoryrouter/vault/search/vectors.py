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

from mcp_memoryrouter.vault.rules.date_words import date_words
from mcp_memoryrouter.vault.rules.domain import SearchFilter
from mcp_memoryrouter.vault.search.rowtable import IndexRow, RowTable

APPROXIMATE_FROM = 20_000  # survivors from which the projected scan pays off
RESCORED = 8  # candidates rescored exactly per wanted row
_FIT_SAMPLE = 20_000  # rows the principal directions are computed from


def embedding_text(content: str, date_from: int, date_to: int, before: str | None = None) -> str:
    """What a memory's vector encodes: when it happened, the turn just before it in the same
    conversation (a short answer means little without its question), then what it says."""
    context = f"{before}\n" if before else ""
    return f"{date_words(date_from, date_to)}: {context}{content}"


@dataclass(frozen=True)
class VectorQuery:
    """A query in one embedding model's space: the model, its dimension, the unit vector."""

    model: str
    dim: int
    vector: npt.NDArray[np.float32]


@dataclass(frozen=True)
class Pending:
    """A memory waiting for its vector, and the text the vector is computed from."""

    row: IndexRow
    text: str


class VectorIndex:
    def __init__(self, dim: int, approximate_from: int = APPROXIMATE_FROM) -> None:
        self.dim = dim
        self._approximate_from = approximate_from
        self._lock = threading.Lock()
        self._rows = RowTable()
        self._matrix = np.zeros((self._rows.capacity, dim), dtype=np.float32)
        self._basis: npt.NDArray[np.float32] | None = None  # dim x dim // 4, when fitted
        self._projected = np.zeros((0, 0), dtype=np.float32)  # rows on the basis, once fitted
        self._fitted_rows = 0

    def __len__(self) -> int:
        return len(self._rows.where)

    def add(self, rows: Sequence[IndexRow], vectors: npt.NDArray[np.float32]) -> None:
        with self._lock:
            table = self._rows
            if table.reserve(table.size + len(rows)):
                self._matrix = np.resize(self._matrix, (table.capacity, self.dim))
                if self._basis is not None:
                    shape = (table.capacity, self._basis.shape[1])
                    self._projected = np.resize(self._projected, shape)
            positions = [table.put(row, table.where.get(row.seq)) for row in rows]
            self._matrix[positions] = vectors
            if self._basis is not None and positions:
                self._projected[positions] = self._matrix[positions] @ self._basis

    def remove(self, seqs: Sequence[int]) -> None:
        with self._lock:
            for seq in seqs:
                self._rows.drop(seq)

    def remove_vault(self, vault: str) -> None:
        with self._lock:
            table = self._rows
            for position in table.vault_positions(vault):
                table.drop(int(table.columns["seq"][position]))

    def search(
        self, vault: str, query: npt.NDArray[np.float32], k: int, where: SearchFilter
    ) -> list[tuple[int, float]]:
        """The ``k`` best (seq, cosine) of the vault's rows that pass the filter."""
        with self._lock:
            mask = self._rows.mask(vault, where)
            if mask is None:
                return []
            n = self._rows.size
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
            seqs = self._rows.columns["seq"][positions]
        top = min(k, scores.size)
        best = np.argpartition(-scores, top - 1)[:top]
        best = best[np.argsort(-scores[best])]
        return [(int(seqs[i]), float(scores[i])) for i in best]

    def warm(self) -> None:
        """Fit the projection now if a search of every row would need it, so the first such
        search does not (about a second at 100k rows, under the lock)."""
        with self._lock:
            if self._rows.live >= self._approximate_from and self.dim >= 8:
                self._fit()

    def _candidates(
        self, positions: npt.NDArray[np.intp], query: npt.NDArray[np.float32], count: int
    ) -> npt.NDArray[np.intp]:
        """The ``count`` positions whose projections score best (caller holds the lock)."""
        basis = self._fit()
        n = self._rows.size
        if positions.size * 4 > n:
            approximate = (self._projected[:n] @ (query @ basis))[positions]
        else:
            approximate = self._projected[positions] @ (query @ basis)
        best: npt.NDArray[np.intp] = positions[np.argpartition(-approximate, count - 1)[:count]]
        return best

    def _fit(self) -> npt.NDArray[np.float32]:
        """The principal directions of the stored vectors, refitted each time the index has
        doubled since the last fit (caller holds the lock)."""
        n = self._rows.size
        if self._basis is not None and n < 2 * self._fitted_rows:
            return self._basis
        alive = np.flatnonzero(self._rows.columns["alive"][:n])
        sample = self._matrix[alive[:: max(1, alive.size // _FIT_SAMPLE)]]
        _, directions = np.linalg.eigh(sample.T @ sample)  # ascending eigenvalues
        basis = np.ascontiguousarray(directions[:, ::-1][:, : self.dim // 4], dtype=np.float32)
        self._projected = np.zeros((self._rows.capacity, basis.shape[1]), dtype=np.float32)
        self._projected[:n] = self._matrix[:n] @ basis
        self._basis, self._fitted_rows = basis, n
        return basis
