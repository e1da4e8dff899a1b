"""The rows of a vector index, by position: float32 while the index is small, int8 with a
scale per row once it is large.

Int8 holds a quarter of float32's bytes (384 dimensions: 384 bytes and a 4-byte scale a row,
~370 MiB at a million). A row ``x`` is stored as ``round(x / s)`` with ``s = max|x| / 127``,
so each component is off by at most ``s / 2`` and a cosine with a unit query by at most
``s / 2 * sum|q|`` (``quantisation_bound``); on unit vectors of 384 dimensions the cosines
are typically within 0.001 of float32's. Scores are computed a block at a time (widened to
float32 in a buffer that stays in cache): widening a whole candidate set at once costs
several times more than the product.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

_BLOCK = 1024  # rows widened to float32 at a time
Positions = npt.NDArray[np.intp]
Floats = npt.NDArray[np.float32]


def quantise(vectors: Floats) -> tuple[npt.NDArray[np.int8], Floats]:
    """Int8 codes and the per-row scales of float32 rows."""
    peak = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(len(vectors), np.float32)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.rint(vectors / scales[:, None]).clip(-127, 127).astype(np.int8)
    return codes, scales


def dequantise(codes: npt.NDArray[np.int8], scales: Floats) -> Floats:
    result = codes.astype(np.float32)
    result *= scales[:, None]
    return result


def quantisation_bound(scales: Floats, query: Floats) -> Floats:
    """The most a cosine of each row with ``query`` can differ from float32's."""
    bound: Floats = scales * np.float32(np.abs(query).sum() / 2)
    return bound


class Rows(Protocol):
    """Vectors by position, grown with their row table."""

    compact: bool

    def grow(self, capacity: int) -> None: ...

    def put(self, positions: Positions, vectors: Floats) -> None: ...

    def scores(self, positions: Positions, query: Floats) -> Floats:
        """Cosines of the rows at ``positions`` with the unit ``query``."""
        ...

    def dense(self, positions: Positions) -> Floats:
        """The rows at ``positions`` as float32 (for fitting)."""
        ...

    def nbytes(self) -> int: ...


class Float32Rows:
    compact = False

    def __init__(self, capacity: int, dim: int) -> None:
        self.matrix = np.zeros((capacity, dim), dtype=np.float32)

    def grow(self, capacity: int) -> None:
        self.matrix = np.resize(self.matrix, (capacity, self.matrix.shape[1]))

    def put(self, positions: Positions, vectors: Floats) -> None:
        self.matrix[positions] = vectors

    def scores(self, positions: Positions, query: Floats) -> Floats:
        size = int(positions[-1]) + 1 if positions.size else 0
        if positions.size * 4 > size:  # broad: one product, no copy of the rows
            broad: Floats = (self.matrix[:size] @ query)[positions]
            return broad
        selective: Floats = self.matrix[positions] @ query
        return selective

    def dense(self, positions: Positions) -> Floats:
        rows: Floats = self.matrix[positions]
        return rows

    def nbytes(self) -> int:
        return int(self.matrix.nbytes)


class Int8Rows:
    compact = True

    def __init__(self, codes: npt.NDArray[np.int8], scales: Floats) -> None:
        self.codes, self.scales = codes, scales
        self._buffer = np.empty((_BLOCK, codes.shape[1]), dtype=np.float32)

    @classmethod
    def of(cls, rows: Float32Rows, size: int) -> Int8Rows:
        """The first ``size`` rows of a float32 matrix, quantised (same capacity)."""
        codes = np.zeros(rows.matrix.shape, dtype=np.int8)
        scales = np.ones(rows.matrix.shape[0], dtype=np.float32)
        codes[:size], scales[:size] = quantise(rows.matrix[:size])
        return cls(codes, scales)

    def grow(self, capacity: int) -> None:
        codes = np.zeros((capacity, self.codes.shape[1]), dtype=np.int8)
        scales = np.ones(capacity, dtype=np.float32)
        kept = min(capacity, len(self.scales))
        codes[:kept], scales[:kept] = self.codes[:kept], self.scales[:kept]
        self.codes, self.scales = codes, scales

    def put(self, positions: Positions, vectors: Floats) -> None:
        self.codes[positions], self.scales[positions] = quantise(vectors)

    def scores(self, positions: Positions, query: Floats) -> Floats:
        out = np.empty(positions.size, dtype=np.float32)
        buffer = self._buffer
        for start in range(0, positions.size, _BLOCK):
            block = positions[start : start + _BLOCK]
            widened = buffer[: block.size]
            np.copyto(widened, self.codes[block], casting="unsafe")
            np.matmul(widened, query, out=out[start : start + block.size])
        out *= self.scales[positions]
        return out

    def dense(self, positions: Positions) -> Floats:
        return dequantise(self.codes[positions], self.scales[positions])

    def nbytes(self) -> int:
        return int(self.codes.nbytes + self.scales.nbytes)
