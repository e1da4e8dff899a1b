"""The ranking rules of hybrid retrieval: query terms, common-word pruning, lexical and dense
fusion, neighbour smoothing, and lifting the sources of a relevant reflection. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from mcp_memoryrouter.vault.rules.domain import ScoredMemory

MAX_TERMS = 32
_WORD = re.compile(r"\w+", re.UNICODE)


# BM25's IDF, log((N - n + 0.5) / (n + 0.5)), reaches zero when a term is in half of the
# vault's memories (FTS5 and our index floor it at 1e-6): such a term cannot rank anything,
# yet searching it scores half the vault. Rarer terms still carry signal: pruning from 10% of
# the memories instead cost 0.3-0.4 points on every LoCoMo figure of a consolidated vault on
# SQLite, and 1.3 points of turn R@10 on PostgreSQL, whose ts_rank_cd has no IDF at all.
# Every figure is the searched vault's own: another vault's memories never decide what is
# searched here.
COMMON_SHARE = 0.5
PRUNE_FROM_ROWS = 1_000  # below this, scoring every match is cheap: keep every term


def prune_common(terms: Sequence[str], doc_freq: dict[str, int], total: int) -> list[str]:
    """Drop query terms that occur in more than half of the vault's ``total`` memories (no
    IDF left, yet each one makes the store score half the vault); keep the rarest when every
    term is common. Terms the index does not know are kept."""
    if total < PRUNE_FROM_ROWS:
        return list(terms)
    kept = [t for t in terms if doc_freq.get(t, 0) <= COMMON_SHARE * total]
    if kept or not terms:
        return kept
    return [min(terms, key=lambda t: doc_freq.get(t, 0))]


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
DENSE_WEIGHT = 0.4
LEXICAL_WEIGHT = 0.6
# A conversation spreads one thought over neighbouring turns (a question, then its answer):
# a raw memory next to a relevant one gains this share of its neighbour's score.
NEIGHBOUR_WEIGHT = 0.6
NEIGHBOUR_GAP_MS = 30 * 60_000


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
    lex, vec = _normalised(lexical), _normalised(dense)
    lexical_weight = LEXICAL_WEIGHT if dense else 1.0
    memories = {h.memory.id: h.memory for h in (*lexical, *dense)}
    fused = {
        key: lexical_weight * lex.get(key, 0.0) + DENSE_WEIGHT * vec.get(key, 0.0)
        for key in memories
    }
    ranked = sorted(fused, key=lambda key: (-fused[key], key))[:limit]
    return [ScoredMemory(memories[key], fused[key]) for key in ranked]


def _neighbours(a: ScoredMemory, b: ScoredMemory) -> bool:
    x, y = a.memory, b.memory
    return (
        x.tier == y.tier == 1
        and abs(x.seq - y.seq) == 1
        and x.session_id == y.session_id
        and abs(x.date_from - y.date_from) <= NEIGHBOUR_GAP_MS
    )


def smooth(hits: Sequence[ScoredMemory], limit: int) -> list[ScoredMemory]:
    """Re-rank raw memories with their conversational neighbours' relevance, best first.

    Neighbours are raw memories stored one after the other in the same session within 30
    minutes; scores stay in [0, 1].
    """
    by_seq = {h.memory.seq: h for h in hits if h.memory.tier == 1 and h.memory.seq}
    rescored: list[ScoredMemory] = []
    for hit in hits:
        boost = 0.0
        for seq in (hit.memory.seq - 1, hit.memory.seq + 1):
            other = by_seq.get(seq)
            if other is not None and hit.memory.seq and _neighbours(hit, other):
                boost = max(boost, other.score or 0.0)
        score = ((hit.score or 0.0) + NEIGHBOUR_WEIGHT * boost) / (1 + NEIGHBOUR_WEIGHT)
        rescored.append(ScoredMemory(hit.memory, score))
    rescored.sort(key=lambda h: (-(h.score or 0.0), h.memory.id))
    return rescored[:limit]


# A reflection is written from a batch of the rows below it and says what they meant; when it
# matches the query, the rows it was built from are likely the exact moments asked about. A row
# gains this share of the best-scoring reflection built on it among the candidates.
DRILL_WEIGHT = 0.5


def lift_sources(
    hits: Sequence[ScoredMemory], links: Iterable[tuple[str, str]], limit: int
) -> list[ScoredMemory]:
    """Re-rank rows with the relevance of the reflections built on them, best first.

    ``links`` are (reflection id, source id) pairs; only pairs with both ends among ``hits``
    count. A source's score becomes its own plus 0.5 x its best-scoring parent, so among rows
    equally relevant on their own, the one a relevant reflection was built from comes first.
    Reflections keep their own score (a parent lifts its sources, never the reverse).
    """
    score = {h.memory.id: h.score or 0.0 for h in hits}
    parent: dict[str, float] = {}
    for reflection_id, source_id in links:
        if reflection_id in score and source_id in score:
            parent[source_id] = max(parent.get(source_id, 0.0), score[reflection_id])
    lifted = [
        ScoredMemory(h.memory, score[h.memory.id] + DRILL_WEIGHT * parent.get(h.memory.id, 0.0))
        for h in hits
    ]
    lifted.sort(key=lambda h: (-(h.score or 0.0), h.memory.id))
    return lifted[:limit]
