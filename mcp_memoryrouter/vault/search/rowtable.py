"""The row attributes an in-memory index filters on, as numpy columns (vault, tier,
importance, session, coverage window, writer), and the search filter as a mask over them.

Both in-memory indexes (vectors, and the lexical postings of the SQLite store) keep one
table: rows are appended at new positions and marked dead when deleted, so a position
never changes meaning while a search holds it. The mask is the search filter's meaning on
SQLite (PostgreSQL's twin is ``store/postgres/search.py:filter_sql``; the store tests run both).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.vault.rules.domain import SearchFilter
from mcp_memoryrouter.vault.search.seqs import SeqPositions

_GROW = 1.5


@dataclass(frozen=True)
class IndexRow:
    seq: int
    vault: str
    tier: int
    importance: int | None
    date_from: int
    date_to: int
    session: str | None
    # the key that stored it when presented in full; "" when presented as ``:write``; None
    # when not known (stored before writers were kept): store/sql.py ``writer_sql``
    writer: str | None = None


_COLUMNS: dict[str, type[np.generic]] = {
    "seq": np.int64,
    "vault": np.int32,
    "tier": np.int8,
    "importance": np.int16,
    "date_from": np.int64,
    "date_to": np.int64,
    "session": np.int32,
    "writer": np.int32,
    "alive": np.bool_,
}


class RowTable:
    """Columns by position; not thread-safe (its index holds the lock)."""

    def __init__(self, capacity: int = 1024) -> None:
        self.size = 0  # positions used, dead ones included
        self.live = 0
        # seq -> position of its live row (numpy arrays: 12 bytes a row, not a dict's ~100)
        self.where: MutableMapping[int, int] = SeqPositions()
        self._codes: dict[str, int] = {}  # vault, session and key ids -> small ints
        self.columns: dict[str, npt.NDArray[Any]] = {
            n: np.zeros(capacity, dtype=t) for n, t in _COLUMNS.items()
        }

    @property
    def capacity(self) -> int:
        return len(self.columns["seq"])

    def _code(self, value: str | None) -> int:
        if value is None:
            return -1
        return self._codes.setdefault(value, len(self._codes))

    def reserve(self, needed: int) -> bool:
        """Make room for ``needed`` positions; True when the columns were reallocated."""
        capacity = self.capacity
        if needed <= capacity:
            return False
        new = max(needed, int(capacity * _GROW))
        for name, old in self.columns.items():
            grown = np.zeros(new, dtype=old.dtype)
            grown[:capacity] = old
            self.columns[name] = grown
        return True

    def put(self, row: IndexRow, position: int | None = None) -> int:
        """Write a row at ``position`` (a fresh one when None); return the position.
        The caller has reserved room."""
        c = self.columns
        if position is None:
            position = self.size
            self.size += 1
        if not c["alive"][position]:
            self.live += 1
        self.where[row.seq] = position
        c["seq"][position] = row.seq
        c["vault"][position] = self._code(row.vault)
        c["tier"][position] = row.tier
        c["importance"][position] = row.importance or 0
        c["date_from"][position] = row.date_from
        c["date_to"][position] = row.date_to
        c["session"][position] = self._code(row.session)
        c["writer"][position] = self._code(row.writer)
        c["alive"][position] = True
        return position

    def drop(self, seq: int) -> int | None:
        """Mark the row of ``seq`` dead; its position, or None when it was not here."""
        position = self.where.pop(seq, None)
        if position is not None:
            self.columns["alive"][position] = False
            self.live -= 1
        return position

    def compacted(self, positions: npt.NDArray[np.intp]) -> RowTable:
        """A table of the rows at ``positions``, moved to 0, 1, ... in that order."""
        fresh = RowTable(max(1024, positions.size))
        for name, column in self.columns.items():
            fresh.columns[name][: positions.size] = column[positions]
        fresh.size = positions.size
        fresh.live = int(np.count_nonzero(fresh.columns["alive"][: positions.size]))
        fresh._codes = dict(self._codes)
        live = np.flatnonzero(fresh.columns["alive"][: positions.size])
        fresh.where = SeqPositions.of(fresh.columns["seq"][live], live)
        return fresh

    def saved(
        self, positions: npt.NDArray[np.intp]
    ) -> tuple[dict[str, npt.NDArray[Any]], list[str]]:
        """The columns of the rows at ``positions`` (in that order) and the strings their
        small ints stand for (index = code): what :meth:`restored` takes back."""
        columns = {name: column[positions] for name, column in self.columns.items()}
        return columns, list(self._codes)

    @classmethod
    def restored(
        cls, columns: dict[str, npt.NDArray[Any]], strings: list[str], capacity: int
    ) -> RowTable:
        """A table of saved columns at positions 0, 1, ... (every row live)."""
        size = len(columns["seq"])
        table = cls(max(capacity, size))
        for name in _COLUMNS:
            table.columns[name][:size] = columns[name]
        table.size = table.live = size
        table._codes = {value: code for code, value in enumerate(strings)}
        table.where = SeqPositions.of(columns["seq"][:size], np.arange(size))
        return table

    def vault_positions(self, vault: str) -> npt.NDArray[np.intp]:
        code = self._codes.get(vault)
        if code is None:
            return np.zeros(0, dtype=np.intp)
        n = self.size
        return np.flatnonzero(self.columns["alive"][:n] & (self.columns["vault"][:n] == code))

    def code_of(self, vault: str) -> int | None:
        """The small int the vault's rows carry in the ``vault`` column (None: no row yet)."""
        return self._codes.get(vault)

    def in_vault(self, vault: str) -> npt.NDArray[np.bool_] | None:
        """Which of the first ``size`` positions are live rows of the vault; None when the
        vault has no row here."""
        code = self._codes.get(vault)
        if code is None or self.size == 0:
            return None
        n, c = self.size, self.columns
        mask: npt.NDArray[np.bool_] = c["alive"][:n] & (c["vault"][:n] == code)
        return mask

    def mask(self, vault: str, where: SearchFilter) -> npt.NDArray[np.bool_] | None:
        """Which of the first ``size`` positions are live rows of the vault passing the
        filter; None when the vault has no row here."""
        rows = self.in_vault(vault)
        return None if rows is None else self.passing(rows, where)

    def passing(self, rows: npt.NDArray[np.bool_], where: SearchFilter) -> npt.NDArray[np.bool_]:
        """``rows`` (a mask over the first ``size`` positions) narrowed to the filter, as a
        new mask."""
        mask = rows.copy()
        self._narrow(mask, slice(0, self.size), where)
        return mask

    def passing_at(
        self, positions: npt.NDArray[np.integer[Any]], where: SearchFilter
    ) -> npt.NDArray[np.bool_]:
        """Which of ``positions`` pass the filter (their vault and liveness are not tested):
        the cost of a few rows, not of the table."""
        mask = np.ones(positions.size, dtype=np.bool_)
        self._narrow(mask, positions, where)
        return mask

    def _narrow(
        self,
        mask: npt.NDArray[np.bool_],
        at: slice | npt.NDArray[np.integer[Any]],
        where: SearchFilter,
    ) -> None:
        c = self.columns
        if where.tiers is not None:
            mask &= np.isin(c["tier"][at], np.array(where.tiers, dtype=np.int8))
        if where.min_importance is not None:
            mask &= c["importance"][at] >= where.min_importance
        if where.session_id is not None:
            session = self._codes.get(where.session_id, -2)
            mask &= (c["tier"][at] > 1) | (c["session"][at] == session)
        if where.window is not None:
            mask &= (c["date_from"][at] <= where.window[1]) & (c["date_to"][at] >= where.window[0])
        if where.writers is not None:  # rules/writers.py: unknown, or a current key in full
            keys = np.array([self._codes.get(k, -2) for k in where.writers], dtype=np.int32)
            mask &= (c["writer"][at] == -1) | np.isin(c["writer"][at], keys)
