"""Near-duplicates on write: for each new text, the memories already in the vault that it
nearly repeats (the rule is ``rules/near.py``; docs/api.md, "Near-duplicates on write").

With an embedding model each text is embedded as the vault embeds a memory (its date, then
its text) in one batch, and the vault's nearest vectors are read for each: their cosines are
the scores. A memory not embedded yet is not found this way (an ingest of at most
``EMBED_BEFORE_ACK`` units is embedded before it answers, so the next write finds it).
Without a model the vault's lexical index proposes candidates and only the same text counts,
at 1.0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mcp_memoryrouter import limits
from mcp_memoryrouter.vault.rules import near
from mcp_memoryrouter.vault.rules.domain import ScoredMemory, SearchFilter
from mcp_memoryrouter.vault.search.embeddings import Embedder
from mcp_memoryrouter.vault.search.ranking import query_terms
from mcp_memoryrouter.vault.search.vectors import VectorQuery, embedding_text
from mcp_memoryrouter.vault.store import Store

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
    everything = SearchFilter()
    wanted = limits.NEAR_DUPLICATES_LISTED
    if embedder is None:
        found: list[list[Found]] = []
        for text, _ in texts:
            hits = store.search_lexical(vault_id, query_terms(text), LEXICAL_CANDIDATES, everything)
            same = [_found(h, 1.0) for h in hits if near.same_text(text, h.memory.content)]
            found.append(same[:wanted])
        return found
    vectors = embedder.embed([embedding_text(text, at, at) for text, at in texts])
    found = []
    for vector in vectors:
        query = VectorQuery(embedder.model_id, embedder.dim, vector)
        hits = store.search_vectors(vault_id, query, wanted, everything)
        found.append([_found(h, h.score or 0.0) for h in hits if near.similar(h.score or 0.0)])
    return found


def _found(hit: ScoredMemory, score: float) -> Found:
    return Found(hit.memory.id, hit.memory.content, round(score, 4))
