"""Near-duplicates on write: for each new text, the memories already in the vault that it
nearly repeats (the rule is ``rules/near.py``; docs/api.md, "Near-duplicates on write"). Only
a write with ``dedupe: "near"`` asks: the default write embeds nothing before it answers.

With an embedding model each text is embedded as the vault embeds a memory (its date, then
its text) in one batch, and the vault's nearest vectors are read for each: their cosines are
the scores. A memory not embedded yet is not found this way (the check first embeds the
vault's latest small writes, as a search does, so the write just before is compared).
Without a model, or when the embedding service fails (the write still succeeds), the vault's
lexical index proposes candidates and only the same text counts, at 1.0.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from mcp_memoryrouter import limits
from mcp_memoryrouter.errors import StoreUnavailable
from mcp_memoryrouter.vault.rules import near
from mcp_memoryrouter.vault.rules.domain import ScoredMemory, SearchFilter
from mcp_memoryrouter.vault.search.embeddings import Embedder, Vectors
from mcp_memoryrouter.vault.search.ranking import query_terms
from mcp_memoryrouter.vault.search.vectors import VectorQuery, embedding_text
from mcp_memoryrouter.vault.store import Store

log = logging.getLogger("mcp_memoryrouter.vault.duplicates")
LEXICAL_CANDIDATES = 10  # without a model: the lexical hits read for the same text


@dataclass(frozen=True)
class Found:
    """A memory of the vault a new text is similar to, and their score."""

    id: str
    content: str
    score: float


def near_duplicates(
    store: Store, vault_id: str, texts: Sequence[tuple[str, int]], embedder: Embedder | None
) -> list[list[Found]]:
    """For each (text, date ms) of ``texts``: the memories it is similar to, best first, at
    most ``NEAR_DUPLICATES_LISTED``."""
    if not texts:
        return []
    if embedder is not None:
        try:
            vectors = embedder.embed([embedding_text(text, at, at) for text, at in texts])
        except StoreUnavailable:
            # an embedding service that fails never fails the write (its rows are queued
            # and embedded later): the check falls back to the same text
            log.warning("near-duplicates by the same text only: the embedding service failed")
        else:
            return _by_vectors(store, vault_id, embedder, vectors)
    found: list[list[Found]] = []
    for text, _ in texts:
        terms = query_terms(text)
        hits = store.search_lexical(vault_id, terms, LEXICAL_CANDIDATES, SearchFilter())
        same = [_found(h, 1.0) for h in hits if near.same_text(text, h.memory.content)]
        found.append(same[: limits.NEAR_DUPLICATES_LISTED])
    return found


def _by_vectors(
    store: Store, vault_id: str, embedder: Embedder, vectors: Vectors
) -> list[list[Found]]:
    everything = SearchFilter()
    wanted = limits.NEAR_DUPLICATES_LISTED
    found = []
    for vector in vectors:
        query = VectorQuery(embedder.model_id, embedder.dim, vector)
        hits = store.search_vectors(vault_id, query, wanted, everything)
        found.append([_found(h, h.score or 0.0) for h in hits if near.similar(h.score or 0.0)])
    return found


def _found(hit: ScoredMemory, score: float) -> Found:
    return Found(hit.memory.id, hit.memory.content, round(score, 4))
