"""An in-memory vector index with metadata masks (numpy).

Rows are appended as the embedding worker stores vectors and dropped when memories are
deleted; a search masks by vault, tier, importance, session and date window, then scores
the survivors (cosine on unit vectors). Masking first keeps every filter exact at any
selectivity, which an approximate graph index does not.

Below ``APPROXIMATE_FROM`` live rows the vectors are float32 and every survivor is scored
exactly (LoCoMo and any vault of that size: the same scores as a plain scan). From there
the rows are int8 with a scale per row (:mod:`.compact`, a quarter of the bytes, cosines
within ~0.001) and an inverted file (:mod:`.ivf`) fitted on them, in a thread of its own,
picks what to score: the survivors of the lists nearest the query, at least ``wanted``
of them; a filter leaving no more than that is scanned whole. Until the lists are fitted
every survivor is scanned.

A large index can be saved and read back (:meth:`VectorIndex.state`, :meth:`restored`),
rows in list order, so a restart reads a file instead of a million rows.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.vault.rules.date_words import date_words
from mcp_memoryrouter.vault.rules.domain import SearchFilter
from mcp_memoryrouter.vault.search.compact import Float32Rows, Int8Rows, Rows
from mcp_memoryrouter.vault.search.ivf import SPILL, Lists
from mcp_memoryrouter.vault.search.rowtable import IndexRow, RowTable

APPROXIMATE_FROM = 20_000  # live rows from which vectors are int8 and lists are fitted
EXACT_MAX = 3_000  # survivors scanned whole, however large the index
PROBED_LISTS = 10  # a search reads at least this many average lists' worth of rows
PER_WANTED = 50  # and at least this many entries per row asked for (30k rows: recall 0.91 -> 0.96)
Dense = Callable[[npt.NDArray[np.intp]], npt.NDArray[np.float32]]


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


@dataclass(frozen=True)
class Saved:
    """A large index as saved: live rows in list order, their int8 vectors, the lists."""

    columns: dict[str, npt.NDArray[Any]]
    strings: list[str]  # what the columns' small ints stand for
    codes: npt.NDArray[np.int8]
    scales: npt.NDArray[np.float32]
    centroids: npt.NDArray[np.float32]
    order: npt.NDArray[np.intp]  # the lists' entries (positions in this saved order)
    offsets: npt.NDArray[np.int64]


class VectorIndex:
    def __init__(
        self,
        dim: int,
        approximate_from: int = APPROXIMATE_FROM,
        probed: int = PROBED_LISTS,
        exact_max: int = EXACT_MAX,
    ) -> None:
        self.dim = dim
        self._approximate_from, self._probed, self._exact_max = approximate_from, probed, exact_max
        self._lock = threading.Lock()
        self._rows = RowTable()
        self._vectors: Rows = Float32Rows(self._rows.capacity, dim)
        self._lists: Lists | None = None
        self._fitting: threading.Thread | None = None
        self.background = False  # fit lists in a thread of their own as the index grows
        self.on_fitted: Callable[[], None] | None = None  # called after each fit
        self.changes = 0  # rows added or dropped so far
        self.saved_changes = 0  # ``changes`` when last saved (its owner's to keep)

    def __len__(self) -> int:
        return len(self._rows.where)

    @property
    def compact(self) -> bool:
        return self._vectors.compact

    @property
    def fitted(self) -> bool:
        return self._lists is not None

    @property
    def fitting(self) -> bool:
        return self._fitting is not None

    def nbytes(self) -> int:
        """Bytes of the vectors, the lists and the row columns (not the seq dictionary)."""
        columns = sum(int(c.nbytes) for c in self._rows.columns.values())
        lists = self._lists.nbytes() if self._lists is not None else 0
        return self._vectors.nbytes() + lists + columns

    def add(self, rows: Sequence[IndexRow], vectors: npt.NDArray[np.float32]) -> None:
        with self._lock:
            table = self._rows
            if table.reserve(table.size + len(rows)):
                self._vectors.grow(table.capacity)
            placed = []
            for row in rows:  # a new vector for a row: a new position (positions never change)
                if table.drop(row.seq) is not None:
                    self.changes += 1
                placed.append(table.put(row))
            positions = np.array(placed, dtype=np.intp)
            self._vectors.put(positions, vectors)
            self.changes += len(rows)
            if self._lists is not None and positions.size:
                self._lists.add(positions, np.asarray(vectors, dtype=np.float32))
            if self._needs_fit() and self.background:
                self._start_fit()

    def remove(self, seqs: Sequence[int]) -> None:
        with self._lock:
            for seq in seqs:
                if self._rows.drop(seq) is not None:
                    self.changes += 1

    def remove_vault(self, vault: str) -> None:
        with self._lock:
            table = self._rows
            for position in table.vault_positions(vault):
                table.drop(int(table.columns["seq"][position]))
                self.changes += 1

    def search(
        self, vault: str, query: npt.NDArray[np.float32], k: int, where: SearchFilter
    ) -> list[tuple[int, float]]:
        """The ``k`` best (seq, cosine) of the vault's rows that pass the filter."""
        with self._lock:
            mask = self._rows.mask(vault, where)
            if mask is None:
                return []
            lists, survivors = self._lists, int(np.count_nonzero(mask))
            wanted = self._wanted(k, survivors)
            if lists is not None and survivors > wanted:
                positions = lists.probe(query, mask, wanted)
            else:  # small index, unfitted lists or a selective filter: every survivor
                positions = np.flatnonzero(mask)
            if positions.size == 0:
                return []
            scores = self._vectors.scores(positions, query)
            seqs = self._rows.columns["seq"][positions]
        top = min(k, scores.size)
        best = np.argpartition(-scores, top - 1)[:top]
        best = best[np.argsort(-scores[best])]
        return [(int(seqs[i]), float(scores[i])) for i in best]

    def _wanted(self, k: int, survivors: int | None = None) -> int:
        """Rows a search of a fitted index scores at least (caller holds the lock): more
        under a filter, by the square root of the share of rows it keeps (the best rows
        of a fifth of the index lie deeper among all rows' neighbours, where the lists
        hold them less well: at a million rows, a vault of 5 % read like the whole index
        kept 0.950 of its best 150, against 0.988 for a vault of 80 %)."""
        lists, live = self._lists, self._rows.live
        average = SPILL * live / len(lists.centroids) if lists is not None else 0
        wanted = max(self._exact_max, PER_WANTED * k, int(self._probed * average))
        share = (survivors if survivors is not None else live) / max(1, live)
        return int(wanted / math.sqrt(max(share, 1e-6)))

    # --- fitting -----------------------------------------------------------------------

    def warm(self) -> None:
        """Fit the lists now if the index needs them (a large index read row by row), so
        searches do not scan every row meanwhile; returns when they are fitted."""
        with self._lock:
            if self._needs_fit():
                self._start_fit()
            fitting = self._fitting
        if fitting is not None:
            fitting.join()

    def start(self) -> None:
        """Fit lists in a thread of their own from now on as the index grows, and now if
        it needs them."""
        with self._lock:
            self.background = True
            if self._needs_fit():
                self._start_fit()

    def wait(self) -> None:
        """Return once no fit is running."""
        fitting = self._fitting
        if fitting is not None:
            fitting.join()

    def _needs_fit(self) -> bool:
        """Caller holds the lock; turns the vectors to int8 when the index has grown large."""
        if self._fitting is not None or self._rows.live < self._approximate_from:
            return False
        if isinstance(self._vectors, Float32Rows):
            self._vectors = Int8Rows.of(self._vectors, self._rows.size)
        lists = self._lists
        return lists is None or lists.tail_rows >= lists.rows  # doubled since the fit

    def _start_fit(self) -> None:
        """Fit lists of the rows so far in a thread; rows added meanwhile join them after
        (caller holds the lock)."""
        size = self._rows.size
        alive = self._rows.columns["alive"][:size].copy()
        dense = self._vectors.dense  # positions below ``size`` never change
        thread = threading.Thread(
            target=self._fit, args=(dense, alive), name="vector-lists", daemon=True
        )
        self._fitting = thread
        thread.start()

    def _fit(self, dense: Dense, alive: npt.NDArray[np.bool_]) -> None:
        lists = None
        try:
            lists = Lists.fit(dense, alive)
        finally:
            with self._lock:
                if lists is not None:
                    later = self._rows.columns["alive"][alive.size : self._rows.size]
                    positions = alive.size + np.flatnonzero(later)
                    lists.add(positions, self._vectors.dense(positions))
                    self._lists = lists
                self._fitting = None
        if self.on_fitted is not None:
            self.on_fitted()

    # --- saved form --------------------------------------------------------------------

    def state(self) -> Callable[[], Saved] | None:
        """How to read the index as saved (None when it is not large). What changes is
        copied under the lock (which rows are live, the lists' tails); the returned call
        reads the rest outside it (positions never change meaning)."""
        with self._lock:
            lists, vectors, rows = self._lists, self._vectors, self._rows
            if lists is None or not isinstance(vectors, Int8Rows):
                return None
            tail = [list(positions) for positions in lists.tail]
            alive = rows.columns["alive"][: rows.size].copy()
            codes, scales = vectors.codes, vectors.scales

        def read() -> Saved:
            entries, labels = lists.labels(tail)
            live = alive[entries]
            entries, labels = entries[live], labels[live]
            sort = np.lexsort((entries, labels))
            entries, labels = entries[sort], labels[sort]
            positions = entries[np.sort(_firsts(entries))]  # each row beside its first list's
            # ... within its vault: a vault's rows in one run, so a search that scans a
            # whole vault reads one stretch of memory (at 1M, a vault of 5 %: p50 36 -> 20 ms)
            positions = positions[np.argsort(rows.columns["vault"][positions], kind="stable")]
            columns, strings = rows.saved(positions)
            moved = np.full(alive.size, -1, np.intp)
            moved[positions] = np.arange(positions.size)
            counts = np.bincount(labels, minlength=len(lists.centroids))
            offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            return Saved(
                columns,
                strings,
                codes[positions],
                scales[positions],
                lists.centroids,
                moved[entries],
                offsets,
            )

        return read

    @classmethod
    def restored(
        cls, saved: Saved, probed: int = PROBED_LISTS, exact_max: int = EXACT_MAX
    ) -> VectorIndex:
        """The index of a saved state. Its arrays may hold more rows than saved (room to
        grow): the columns say how many there are."""
        size, dim = len(saved.columns["seq"]), saved.codes.shape[1]
        index = cls(dim, probed=probed, exact_max=exact_max)
        index._rows = RowTable.restored(saved.columns, saved.strings, len(saved.codes))
        index._vectors = Int8Rows(saved.codes, saved.scales)
        index._lists = Lists(saved.centroids, saved.order, saved.offsets, size)
        return index


def _firsts(values: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """Where each value first occurs (by sorting: numpy's hashed ``unique`` took 4.4 s on a
    million sorted int64 here)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    first: npt.NDArray[np.intp] = order[np.concatenate([[True], ordered[1:] != ordered[:-1]])]
    return first
