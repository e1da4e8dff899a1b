"""Which query words are too common to search for, on PostgreSQL.

A word in a large share of all memories (a name in a two-person conversation, "week" in a
diary) barely changes the ranking, yet an OR-query with it makes ``ts_rank_cd`` score a
large share of the vault: at 100k memories one such word turned a 30 ms search into 200 ms.
The SQLite store drops these words with the document frequencies of its own index
(:func:`retrieval.prune_common`); here they come from the statistics ``ANALYZE`` keeps for
the ``tsv`` column anyway (``pg_stats.most_common_elems``: every lexeme in more than a small
share of the rows, with the share), so a search adds no scan. Autovacuum analyzes the table
as it grows; the statistics are read again at most once a minute. Before the first
``ANALYZE`` nothing is dropped, which is the behaviour without this module.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from mcp_memoryrouter.vault.retrieval import prune_common, word_freqs

Conn = psycopg.Connection[tuple[Any, ...]]

STATS_TTL_S = 60.0
_MAX_CACHED_WORDS = 50_000

_STATS = (
    "SELECT c.reltuples, s.most_common_elems::text::text[], s.most_common_elem_freqs "
    "FROM pg_class c LEFT JOIN pg_stats s ON s.schemaname = c.relnamespace::regnamespace::text "
    "AND s.tablename = c.relname AND s.attname = 'tsv' "
    "WHERE c.oid = 'memories'::regclass"
)
# The lexemes of each word under the configuration of the ``tsv`` column; a stop word has none.
_LEXEMES = (
    "SELECT w, array(SELECT lexeme FROM unnest(to_tsvector('english', w))) "
    "FROM unnest(%s::text[]) AS w"
)


class CommonTerms:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._lexemes: dict[str, tuple[str, ...]] = {}
        self._share: dict[str, float] = {}
        self._rows = 0
        self._read_at: float | None = None

    def searchable(self, conn: Conn, terms: Sequence[str]) -> list[str]:
        """``terms`` without stop words and without words too common to rank anything (all
        but the rarest when every word is common), in their order."""
        lexemes = self._lexemes_of(conn, terms)
        words = [t for t in terms if lexemes[t]]
        share, rows = self._statistics(conn)
        doc_freq = {x: round(share * rows) for x, share in share.items()}
        return prune_common(words, word_freqs(lexemes, doc_freq), rows)

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

    def _statistics(self, conn: Conn) -> tuple[dict[str, float], int]:
        now = self._clock()
        with self._lock:
            if self._read_at is not None and now - self._read_at < STATS_TTL_S:
                return self._share, self._rows
        row = conn.execute(_STATS).fetchone()
        rows, elems, freqs = row if row is not None else (0, None, None)
        # Two or three summary figures (min, max, null share) follow the per-lexeme shares;
        # zip stops at the last lexeme.
        share = dict(zip(elems or [], freqs or [], strict=False))
        with self._lock:
            self._share, self._rows, self._read_at = share, max(int(rows), 0), now
            return self._share, self._rows
