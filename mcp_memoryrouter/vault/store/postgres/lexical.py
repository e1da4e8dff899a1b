"""Which query words are too common to search for, on PostgreSQL.

A word in a large share of a vault's memories (a name in a two-person conversation, "week"
in a diary) barely changes the ranking, yet an OR-query with it makes ``ts_rank_cd`` score a
large share of the vault: at 100k memories one such word turned a 30 ms search into 200 ms.
The SQLite store drops these words with the document frequencies of its own index
(:func:`search.ranking.prune_common`); here they come from the vault's own memories, never from
the whole table (another vault's memories must not decide what this one searches, nor
reveal what they hold): the vault's row count from its counters, and each lexeme's share of
a sample of the vault's memories, its 2,000 most recent (all of them in a smaller vault,
where the figures are exact). One grouped query over the sample (bounded whatever the vault
size, and skipped for a vault too small to prune) is cached per vault for a minute.
``ts_rank_cd`` itself reads no corpus statistics: it scores each memory on its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mcp_memoryrouter.db.postgres import Conn
from mcp_memoryrouter.vault.search.ranking import COMMON_SHARE, PRUNE_FROM_ROWS, prune_common

# The text search configuration of the ``tsv`` column (migration 0005): English stems, no
# stop words dropped.
TEXT_SEARCH = "memoryrouter"
STATS_TTL_S = 60.0
SAMPLE_ROWS = 2_000
_MAX_CACHED_WORDS = 50_000
_MAX_CACHED_VAULTS = 10_000

_ROWS = "SELECT n1 + n2 + n3 FROM vaults WHERE id = %s"
# Lexemes in a large share of the sample, with the number of sampled memories holding each
# (a tsvector lists a lexeme once). memories_date serves the ORDER BY ... LIMIT. Over 2,000
# memories this takes 10-20 ms; unnest(tsv), which also builds positions, took 40-55 ms.
_SAMPLE = (
    "SELECT u, count(*) FROM (SELECT tsv FROM memories WHERE vault_id = %s "
    "ORDER BY date_from DESC, seq DESC LIMIT %s) AS s, unnest(tsvector_to_array(s.tsv)) AS u "
    "GROUP BY u HAVING count(*) >= %s"
)
# The lexemes of each word under the configuration of the ``tsv`` column (none for a word of
# punctuation alone).
_LEXEMES = (
    f"SELECT w, array(SELECT lexeme FROM unnest(to_tsvector('{TEXT_SEARCH}', w))) "
    "FROM unnest(%s::text[]) AS w"
)


@dataclass(frozen=True)
class _Statistics:
    read_at: float
    rows: int  # the vault's memories
    doc_freq: dict[str, int]  # lexeme -> memories holding it (estimated from the sample)


class CommonTerms:
    def __init__(
        self, clock: Callable[[], float] = time.monotonic, sample_rows: int = SAMPLE_ROWS
    ) -> None:
        self._clock = clock
        self._sample_rows = sample_rows
        self._lock = threading.Lock()
        self._lexemes: dict[str, tuple[str, ...]] = {}
        self._vaults: dict[str, _Statistics] = {}

    def searchable(self, conn: Conn, vault_id: str, terms: Sequence[str]) -> list[str]:
        """``terms`` without words that have no lexeme or are too common in the vault to rank
        anything (all but the rarest when every word is common), in their order."""
        return self._searchable(conn, vault_id, terms, self._lexemes_of(conn, terms))

    def lexemes(self, conn: Conn, vault_id: str, terms: Sequence[str]) -> list[str]:
        """The lexemes of the searchable ``terms``, one entry per word that gives it (a lexeme
        two words give counts twice, as a token does in FTS5)."""
        lexemes = self._lexemes_of(conn, terms)
        return [x for t in self._searchable(conn, vault_id, terms, lexemes) for x in lexemes[t]]

    def _searchable(
        self,
        conn: Conn,
        vault_id: str,
        terms: Sequence[str],
        lexemes: dict[str, tuple[str, ...]],
    ) -> list[str]:
        words = [t for t in terms if lexemes[t]]
        stats = self._statistics(conn, vault_id)
        # A word that splits into several lexemes (``e-mail``) is as selective as its rarest.
        doc_freq = {t: min(stats.doc_freq.get(x, 0) for x in lexemes[t]) for t in words}
        return prune_common(words, doc_freq, stats.rows)

    def _lexemes_of(self, conn: Conn, terms: Sequence[str]) -> dict[str, tuple[str, ...]]:
        with self._lock:
            known = {t: self._lexemes[t] for t in terms if t in self._lexemes}
        missing = [t for t in terms if t not in known]
        if missing:
            found = {w: tuple(x) for w, x in conn.execute(_LEXEMES, (missing,)).fetchall()}
            with self._lock:
                if len(self._lexemes) + len(found) > _MAX_CACHED_WORDS:
                    self._lexemes.clear()
                self._lexemes.update(found)
            known.update(found)
        return known

    def _statistics(self, conn: Conn, vault_id: str) -> _Statistics:
        now = self._clock()
        with self._lock:
            cached = self._vaults.get(vault_id)
        if cached is not None and now - cached.read_at < STATS_TTL_S:
            return cached
        row = conn.execute(_ROWS, (vault_id,)).fetchone()
        rows = int(row[0]) if row is not None else 0
        doc_freq: dict[str, int] = {}
        if rows >= PRUNE_FROM_ROWS:
            sampled = min(rows, self._sample_rows)
            # only lexemes the rule could call common matter (half its share: a margin)
            floor = max(1, int(COMMON_SHARE * sampled / 2))
            found = conn.execute(_SAMPLE, (vault_id, sampled, floor)).fetchall()
            doc_freq = {lexeme: round(count * rows / sampled) for lexeme, count in found}
        stats = _Statistics(now, rows, doc_freq)
        with self._lock:
            if len(self._vaults) >= _MAX_CACHED_VAULTS:
                self._vaults.clear()
            self._vaults[vault_id] = stats
        return stats
