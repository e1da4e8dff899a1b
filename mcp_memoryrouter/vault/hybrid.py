"""Hybrid retrieval: the store's BM25 and vector candidates, fused, smoothed over neighbours,
then the sources of relevant reflections lifted, re-ranked by the learned ranker when the
package ships one (:mod:`.search.learned`), and what matched neither a query word nor the
model's relevance floor left out. The ranking rules are pure (:mod:`.search.ranking`); this
module runs them over a store, for search, prepare and date search alike."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from mcp_memoryrouter.vault.rules.domain import ScoredMemory, SearchFilter
from mcp_memoryrouter.vault.rules.when import Window
from mcp_memoryrouter.vault.search import learned
from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.search.features import Candidates
from mcp_memoryrouter.vault.search.learned import LearnedRanker
from mcp_memoryrouter.vault.search.ranking import (
    SAME_STORY_DECAY,
    fuse,
    in_time,
    lift_sources,
    newer_first,
    parent_scores,
    query_terms,
    relevant,
    smooth,
    spread,
)
from mcp_memoryrouter.vault.search.vectors import VectorQuery
from mcp_memoryrouter.vault.store import Store

CANDIDATES = 150  # per retrieval path, before fusion
THREADS = 16  # lexical halves of concurrent searches (started on first use)


class HybridSearch:
    """Its own threads run the lexical half of a search while the query is embedded."""

    def __init__(
        self,
        store: Store,
        embedders: Embedders,
        ranker: LearnedRanker | Literal["shipped"] | None = "shipped",
    ) -> None:
        """``ranker``: the learned ranker to re-rank with; by default the package's file
        (:func:`learned.load`), None for today's fusion alone."""
        self._store = store
        self._embedders = embedders
        self.ranker = learned.load() if ranker == "shipped" else ranker
        self._threads = ThreadPoolExecutor(THREADS, thread_name_prefix="lexical-search")

    def close(self) -> None:
        self._threads.shutdown(wait=True)

    def __call__(
        self,
        vault_id: str,
        query: str,
        limit: int,
        where: SearchFilter,
        embeddings: str | None,
        named_time: Window | None = None,
        *,
        meaning: str | None = None,
    ) -> list[ScoredMemory]:
        """The ``limit`` best memories for ``query``, with the model ``embeddings`` names
        (the server's default when None; lexical only when the server has none). The vector
        side embeds ``meaning`` when given (prepare's newest message), else ``query``."""
        found, floor = self.candidates(
            vault_id, query, limit, where, embeddings, named_time, meaning=meaning
        )
        return page(found, floor, limit, self.ranker)

    def candidates(
        self,
        vault_id: str,
        query: str,
        limit: int,
        where: SearchFilter,
        embeddings: str | None,
        named_time: Window | None = None,
        *,
        meaning: str | None = None,
    ) -> tuple[Candidates, float | None]:
        """What a search for ``query`` finds before its page is cut (in today's order), and
        the embedding model's relevance floor."""
        embedder = self._embedders.get(self._embedders.resolve(embeddings))
        depth = max(limit * 3, CANDIDATES)
        terms = query_terms(query)
        dense: list[ScoredMemory] = []
        if embedder is None:
            lexical = self._store.search_lexical(vault_id, terms, depth, where)
        else:
            # BM25 runs while the query is embedded and the vectors scanned: SQLite, onnxruntime
            # and numpy all release the GIL, so the two paths overlap on a multi-core machine.
            pending = self._threads.submit(
                self._store.search_lexical, vault_id, terms, depth, where
            )
            try:
                vector = VectorQuery(
                    embedder.model_id, embedder.dim, embedder.embed([meaning or query])[0]
                )
                dense = self._store.search_vectors(vault_id, vector, depth, where)
            finally:
                lexical = pending.result()
        hits = smooth(fuse(lexical, dense, depth), depth)
        parents = [h.memory.id for h in hits if h.memory.tier > 1]
        lifted: dict[str, float] = {}
        if parents:
            sources = [h.memory.id for h in hits if h.memory.tier < 3]
            links = list(self._store.links(vault_id, parents, sources))
            lifted = parent_scores(hits, links)
            hits = lift_sources(hits, links, depth)
        if named_time is not None:
            hits = in_time(hits, named_time)
        floor = None if embedder is None else embedder.relevance_floor
        return Candidates(query, lexical, dense, hits, lifted, named_time), floor


def page(
    found: Candidates, floor: float | None, limit: int, ranker: LearnedRanker | None
) -> list[ScoredMemory]:
    """The ``limit`` hits of ``found`` a search returns: re-ranked by ``ranker`` when there
    is one and the search is like those it learned from, without noise, near ties newer
    first, spread over stories (with the decay of the scores the page holds)."""
    if ranker is not None and ranker.reranks(found):
        hits, decay, weak = ranker.rerank(found), learned.STORY_DECAY, learned.WEAK
    else:
        hits, decay, weak = list(found.ordered), SAME_STORY_DECAY, 0.0
    kept = newer_first(relevant(hits, found.lexical, found.dense, floor))
    return spread(kept, limit, decay, weak)
