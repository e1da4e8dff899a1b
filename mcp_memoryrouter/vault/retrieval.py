"""Turning a query into lexical search terms."""

from __future__ import annotations

import re
from collections.abc import Sequence

from mcp_memoryrouter.vault.domain import ScoredMemory

MAX_TERMS = 32
_WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(query: str) -> list[str]:
    """Distinct lower-cased words of the query, in order, at most 32."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        seen.setdefault(word, None)
        if len(seen) == MAX_TERMS:
            break
    return list(seen)


# Dense similarity carries meaning (paraphrases, synonyms); BM25 carries exact words, names
# and numbers. Each list is min-max normalised to [0, 1] and the two are summed with these
# weights: equal-weight rank fusion let the small dense model drag good lexical hits down.
DENSE_WEIGHT = 0.6
LEXICAL_WEIGHT = 0.4


def _normalised(hits: Sequence[ScoredMemory]) -> dict[str, float]:
    if not hits:
        return {}
    scores = [h.score or 0.0 for h in hits]
    low, high = min(scores), max(scores)
    span = high - low
    return {h.memory.id: 1.0 if span == 0 else ((h.score or 0.0) - low) / span for h in hits}


def fuse(
    lexical: Sequence[ScoredMemory], dense: Sequence[ScoredMemory], limit: int
) -> list[ScoredMemory]:
    """Weighted min-max fusion of a lexical and a dense candidate list, best first.

    Tiers compete on relevance alone: a specific question's exact words pull raw moments up
    through BM25, while a broad question's meaning matches the summaries reflections hold.
    """
    if not dense:
        return list(lexical[:limit])
    lex, vec = _normalised(lexical), _normalised(dense)
    memories = {h.memory.id: h.memory for h in (*lexical, *dense)}
    fused = {
        key: LEXICAL_WEIGHT * lex.get(key, 0.0) + DENSE_WEIGHT * vec.get(key, 0.0)
        for key in memories
    }
    ranked = sorted(fused, key=lambda key: (-fused[key], key))[:limit]
    return [ScoredMemory(memories[key], round(fused[key], 6)) for key in ranked]
