"""What both in-memory indexes are: rows in, the best rows of one vault out.

:class:`~.lexical.LexicalIndex` answers a query's tokens with BM25 scores and
:class:`~.vectors.VectorIndex` a query vector with cosines, each over the same row table
(:mod:`.rowtable`), filtered exactly by the search filter before scoring. The SQLite store
keeps one of each in memory (per embedding model for vectors) and removes what it deletes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from mcp_memoryrouter.vault.rules.domain import SearchFilter

Q = TypeVar("Q", contravariant=True)
Hit = tuple[int, float]  # (seq, score): higher is better


class SearchIndex(Protocol[Q]):
    def __len__(self) -> int:
        """Rows the index holds."""
        ...

    def search(self, vault: str, query: Q, k: int, where: SearchFilter) -> list[Hit]:
        """The ``k`` best of the vault's rows that pass ``where``, best first. Statistics
        (BM25's corpus figures) are the vault's own, whatever the filter."""
        ...

    def remove(self, seqs: Sequence[int]) -> None: ...

    def remove_vault(self, vault: str) -> None: ...
