"""The ranking rules of hybrid retrieval: query terms, common-word pruning, lexical and dense
fusion, neighbour smoothing, lifting the sources of a relevant reflection, and the relevance
floor. Pure."""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Iterable, Sequence

from mcp_memoryrouter import limits
from mcp_memoryrouter.vault.rules import chunking
from mcp_memoryrouter.vault.rules.domain import Memory, ScoredMemory

MAX_TERMS = 32
_WORD = re.compile(r"\w+", re.UNICODE)


# BM25's IDF, log((N - n + 0.5) / (n + 0.5)), reaches zero when a term is in half of the
# vault's memories (FTS5 and our index floor it at 1e-6): such a term cannot rank anything,
# yet searching it scores half the vault. Rarer terms still carry signal: pruning from 10% of
# the memories instead cost 0.3-0.4 points on every LoCoMo figure of a consolidated vault on
# SQLite, and 1.3 points of turn R@10 on PostgreSQL when it ranked with ts_rank_cd (no IDF).
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


def relevant(
    hits: Sequence[ScoredMemory],
    lexical: Sequence[ScoredMemory],
    dense: Sequence[ScoredMemory],
    floor: float | None,
) -> list[ScoredMemory]:
    """``hits`` (in their order) without what the ranking itself says is noise: a hit is kept
    when it matched a searched query word (it is among the ``lexical`` candidates: BM25 > 0
    on a word not pruned as common) or its raw cosine in ``dense`` is at least ``floor`` (the
    embedding model's relevance floor; None keeps every dense candidate). Min-max fusion alone
    gives the last candidate 0.0 and fills a page with whatever is least unlike the query."""
    keep = {h.memory.id for h in lexical}
    keep.update(h.memory.id for h in dense if floor is None or (h.score or 0.0) >= floor)
    return [h for h in hits if h.memory.id in keep]


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


def parent_scores(
    hits: Sequence[ScoredMemory], links: Iterable[tuple[str, str]]
) -> dict[str, float]:
    """Source id -> the best score among ``hits`` of a reflection built on it (pairs of
    ``links``, (reflection id, source id), with both ends among ``hits``)."""
    score = {h.memory.id: h.score or 0.0 for h in hits}
    parent: dict[str, float] = {}
    for reflection_id, source_id in links:
        if reflection_id in score and source_id in score:
            parent[source_id] = max(parent.get(source_id, 0.0), score[reflection_id])
    return parent


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
    parent = parent_scores(hits, links)
    lifted = [
        ScoredMemory(h.memory, score[h.memory.id] + DRILL_WEIGHT * parent.get(h.memory.id, 0.0))
        for h in hits
    ]
    lifted.sort(key=lambda h: (-(h.score or 0.0), h.memory.id))
    return lifted[:limit]


# A page of hits should tell the whole story, not one conversation of it: among its first
# SPREAD_HEAD places (what a model reads first), a hit from a story (a session; each reflection
# tier) that already has a hit there counts this much less per hit already there, so when
# scores are close the head spreads over sessions and tiers, and a clearly better hit still
# comes first. The places after the head follow the score: a session's further turns stay on
# a page of ten. Spreading the whole page cost LoCoMo, with its sessions sent, 3.6 points of
# turn R@10 (a single-hop answer's evidence is often several turns of one session); a softer,
# non-compounding 0.9 over the whole page kept R@10 but spread the head half as much.
SAME_STORY_DECAY = 0.85
FREE_PER_STORY = 1  # hits of one story in the head before the decay starts
SPREAD_HEAD = 5
# The units one long message was stored as are one hit: only the best of them takes a place on
# the page. Units share the message's role, session and date and are stored one after another;
# so do the turns of a conversation imported with one date per session, so a unit is also told
# by its size (a split message's units are ~300 tokens) or, for its short last unit, by the
# ~30 tokens it repeats from the unit before it (rules/chunking.py).
UNITS_APART = 8
UNIT_TOKENS = chunking.TARGET_TOKENS * 2 // 3  # a unit is cut at 70 % of the target or later
UNIT_OVERLAP_CHARS = chunking.OVERLAP_TOKENS * 2  # half of what a unit repeats (~4 chars a token)


def story(memory: Memory) -> str | None:
    """Which story a memory belongs to, for spreading a page: its session, or its tier for a
    reflection. A raw memory stored without a session is in no known story (None): the page
    is not spread over guesses (grouping by day cost LoCoMo's single-session questions 2.6
    points of turn R@10)."""
    if memory.tier > 1:
        return f"tier {memory.tier}"
    if memory.session_id is not None:
        return f"session {memory.session_id}"
    return None


def _message(memory: Memory) -> tuple[object, ...] | None:
    if memory.tier != 1 or not memory.seq:
        return None
    return (memory.role, memory.session_id, memory.date_from)


def _one_message(a: Memory, b: Memory) -> bool:
    """Whether two raw memories of one role, session and date are units of one message."""
    if abs(a.seq - b.seq) > UNITS_APART:
        return False
    if a.tokens >= UNIT_TOKENS and b.tokens >= UNIT_TOKENS:
        return True
    first, then = (a, b) if a.seq < b.seq else (b, a)
    head = then.content[:UNIT_OVERLAP_CHARS]
    return then.seq - first.seq == 1 and len(head) == UNIT_OVERLAP_CHARS and head in first.content


def _one_place_per_message(hits: Sequence[ScoredMemory]) -> list[ScoredMemory]:
    """``hits`` without the units of a message whose better unit is already kept. Only the
    units a unit can be one message with are compared (the one stored just before and after
    it, and, for a full-size unit, the full-size ones kept): a search compares each candidate
    with a few, not with all 150."""
    kept: list[ScoredMemory] = []
    by_seq: dict[tuple[object, ...], dict[int, Memory]] = {}
    full: dict[tuple[object, ...], list[Memory]] = {}
    for hit in hits:
        memory = hit.memory
        message = _message(memory)
        if message is not None:
            near = by_seq.get(message)
            if near is None:
                near = by_seq[message] = {}
            elif _unit_of_one(memory, near, full.get(message, ())):
                continue
            near[memory.seq] = memory
            if memory.tokens >= UNIT_TOKENS:
                full.setdefault(message, []).append(memory)
        kept.append(hit)
    return kept


def _unit_of_one(memory: Memory, near: dict[int, Memory], full: Sequence[Memory]) -> bool:
    """Whether ``memory`` is a unit of a message one of whose units is already kept."""
    for other in (near.get(memory.seq - 1), near.get(memory.seq + 1)):
        if other is not None and _one_message(memory, other):
            return True
    return memory.tokens >= UNIT_TOKENS and any(_one_message(memory, o) for o in full)


def spread(
    hits: Sequence[ScoredMemory],
    limit: int,
    decay: float = SAME_STORY_DECAY,
    weak: float = 0.0,
) -> list[ScoredMemory]:
    """The best ``limit`` of ``hits`` (in their order, best first) as one page: the units of
    one message collapsed into its best unit; then the head's places filled by rank decayed
    (times ``decay``) by how many hits of its story the page already holds; then the rest in
    order, where a hit ranked under ``weak`` is decayed the same way (a weak hit of a story
    the page has yields to a weak hit of another). A hit's rank is the lowest score at or
    above its place, so an order that is not by score alone (a near tie given to the newer)
    holds. Scores stay each hit's own: ``decay`` and ``weak`` are on the scores' own scale
    (fused scores: :data:`SAME_STORY_DECAY`, nothing weak; the learned ranker's
    probabilities: ``learned.STORY_DECAY`` and ``learned.WEAK``)."""
    kept = _one_place_per_message(hits)
    ranks: list[float] = []
    for hit in kept:
        ranks.append(min(hit.score or 0.0, ranks[-1]) if ranks else (hit.score or 0.0))
    stories = [story(hit.memory) for hit in kept]
    count: dict[str, int] = {}
    head = _fill(ranks, stories, range(len(kept)), min(limit, SPREAD_HEAD), decay, math.inf, count)
    placed = set(head)
    rest = [i for i in range(len(kept)) if i not in placed]
    tail = _fill(ranks, stories, rest, limit - len(head), decay, weak, count)
    return [kept[i] for i in head + tail]


def _fill(
    ranks: Sequence[float],
    stories: Sequence[str | None],
    indices: Iterable[int],
    places: int,
    decay: float,
    below: float,
    count: dict[str, int],
) -> list[int]:
    """``places`` of ``indices`` by rank, a rank under ``below`` decayed by the hits its story
    already has on the page beyond :data:`FREE_PER_STORY` (``count``, updated)."""
    heap: list[tuple[float, int, int]] = [(-ranks[i], i, -1) for i in indices]
    heapq.heapify(heap)
    out: list[int] = []
    while heap and len(out) < places:
        _, index, counted = heapq.heappop(heap)
        told = stories[index]
        now = 0 if told is None else count.get(told, 0)
        if ranks[index] < below and now != counted and now >= FREE_PER_STORY:
            decayed = ranks[index] * decay ** (now - FREE_PER_STORY + 1)
            heapq.heappush(heap, (-decayed, index, now))  # its story has its share: lower
            continue
        out.append(index)
        if told is not None:
            count[told] = now + 1
    return out


# A question that names a time ("last month", "in May") prefers what happened then: hits whose
# date or coverage overlaps that window gain this share of their score (a boost, not a filter:
# the words may not mean a time at all).
TIME_BOOST = 0.5


def in_time(hits: Sequence[ScoredMemory], window: tuple[int, int]) -> list[ScoredMemory]:
    """``hits`` with what happened inside ``window`` boosted, best first: a raw memory inside
    it by the whole boost, a reflection by the share of its coverage inside it (one that
    covers a year is not "what happened in July"; boosting it whole cost LoCoMo's temporal
    questions 1.1 points of turn R@10 with reflections, its sources crowding out moments)."""
    start, end = window
    boosted = []
    for h in hits:
        low, high = max(start, h.memory.date_from), min(end, h.memory.date_to)
        share = (
            0.0 if low > high else (high - low + 1) / (h.memory.date_to - h.memory.date_from + 1)
        )
        boosted.append(ScoredMemory(h.memory, (h.score or 0.0) * (1 + TIME_BOOST * share)))
    boosted.sort(key=lambda h: (-(h.score or 0.0), h.memory.id))
    return boosted


# Facts change: "I moved to Lyon", then a year later "we relocated to Lisbon". Both answer
# "where do I live?", and the newer must not rank under the older. Two hits of one tier whose
# scores are this close are a tie for relevance, and a tie goes to the newer; both stay on
# the page, dated. A weight on recency over every candidate instead cost LoCoMo's category 3
# 1.7 points of turn R@10 (it reorders hits that are not ties at all).
NEAR_TIE = 0.05
LATER_MS = 24 * 3_600_000  # "newer" is another day: turns of one conversation are not ties
# Only the first page of a search (its default limit) is reordered: which hits make a page of
# ten never changes, only their order. Reordering every candidate cost LoCoMo's category 3
# 1.1 to 2.8 points of turn R@10 (hits crossing the tenth place), and gained nothing on
# bench/stories.py's updated facts.
TIES_WITHIN = limits.SEARCH_LIMIT_DEFAULT


def newer_first(hits: Sequence[ScoredMemory]) -> list[ScoredMemory]:
    """``hits`` (best first) with each near tie of one tier among the first ``TIES_WITHIN``
    ordered newer first: a hit moves above the hits just before it that are of its tier, a
    day or more older, and score less than 5 % more. Scores stay each hit's own."""
    ordered = sorted(hits, key=lambda h: (-(h.score or 0.0), h.memory.id))
    for i in range(1, min(TIES_WITHIN, len(ordered))):
        hit = ordered[i]
        floor = (hit.score or 0.0) / (1 - NEAR_TIE)
        j = i
        while j > 0:
            above = ordered[j - 1]
            if (
                above.memory.tier != hit.memory.tier
                or hit.memory.date_to - above.memory.date_to < LATER_MS
                or (above.score or 0.0) > floor
            ):
                break
            j -= 1
        if j < i:
            ordered[j + 1 : i + 1] = ordered[j:i]
            ordered[j] = hit
    return ordered
