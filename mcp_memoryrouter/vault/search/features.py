"""What the learned ranker knows of a candidate: one row of numbers per memory, computed from
what a search has already found (its BM25 and vector lists, today's fused order) and from the
texts themselves. Pure: the same candidates always give the same rows.

Every feature means the same on any vault: ranks and scores relative to the search's own
lists, shares of the question's words (its names, its numbers, the words few candidates
hold), the time the question names, the neighbours' scores, length, tier, role. None names a
data set's words or people."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.vault.rules.domain import ScoredMemory
from mcp_memoryrouter.vault.rules.when import Window

_WORD = re.compile(r"\w+", re.UNICODE)
_DAY_MS = 86_400_000
ABSENT_RANK = 200  # the rank of a candidate a list did not return (past its 150 candidates)
NEIGHBOUR_GAP_MS = 30 * 60_000  # as ranking.smooth: the turns around one thought
# Two candidates are like statements when they share at least this share of their words, or
# answer the question as closely: fused scores within LIKE_SCORE of each other, both at least
# LIKE_HEAD of the search's best. (The candidates carry no vectors of their own, and an
# update's two statements are often told in other words: "I just moved to Leeds" and "we
# relocated to Valencia".) A like candidate is later when it was said at least a day after
# (the turns of one conversation are one statement, not an update).
LIKE_WORDS = 0.5
LIKE_SCORE = 0.8
LIKE_HEAD = 0.5

FEATURES: tuple[str, ...] = (
    "bm25",  # the raw BM25 score (0: not among the lexical candidates)
    "bm25_share",  # BM25 over the search's best BM25
    "bm25_rank",  # its place in the lexical list
    "cosine",  # the raw cosine (the dense list's last when not among its candidates)
    "cosine_gap",  # the best cosine of the search minus its own
    "cosine_rank",  # its place in the dense list
    "in_both",  # 1 when both lists returned it
    "fused",  # today's smoothed fusion score
    "fused_rank",  # its place in today's order
    "neighbour_best",  # the best fused score of the turns stored just before and after it
    "neighbour_cosine",  # the best cosine of those turns
    "day_best",  # the best fused score among candidates of its day (itself left out)
    "day_count",  # how many candidates share its day
    "terms_share",  # share of the question's words it holds
    "rare_share",  # IDF-weighted share, the IDF taken over the candidates
    "names_share",  # share of the question's capitalised words (past its first) it holds
    "numbers_share",  # share of the question's numbers it holds
    "bigrams",  # question word pairs it holds in order
    "tokens_log",  # log of its length in tokens
    "tier",
    "importance",  # 0 when none
    "role_assistant",  # 1 for an assistant's message
    "lifted",  # score of the best reflection built on it among the candidates (lift_sources)
    "named_time",  # 1 when the question names a time
    "in_window",  # share of its coverage inside the time named (0 when none)
    "window_days",  # days between it and the time named (0 inside it or when none)
    "age_days_log",  # log(1 + days before the newest candidate)
    "date_rank",  # its place among the candidates by date, newest first, over their number
    "query_terms",  # how many words the question has
    "bm25_best",  # the search's best BM25 (how well the question's words matched at all)
    "cosine_best",  # the search's best cosine
    "lead_name",  # 1 when one of its first three words is a name the question holds
)


@dataclass(frozen=True)
class Candidates:
    """What one search found: the BM25 and dense lists (best first, raw scores), today's
    smoothed and lifted order of every candidate, and the reflection scores that lifted a
    source (source id -> best parent score)."""

    query: str
    lexical: Sequence[ScoredMemory]
    dense: Sequence[ScoredMemory]
    ordered: Sequence[ScoredMemory]
    lifted: Mapping[str, float]
    named_time: Window | None = None


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def names_in(query: str) -> set[str]:
    """The query's capitalised words past its first word (names, places, titles), lower-cased."""
    found = _WORD.findall(query)
    return {w.lower() for w in found[1:] if w[:1].isupper()}


def numbers_in(query: str) -> set[str]:
    return {w for w in words(query) if any(c.isdigit() for c in w)}


def share(wanted: set[str], held: set[str]) -> float:
    """How much of ``wanted`` ``held`` has (0 when nothing is wanted)."""
    return len(wanted & held) / len(wanted) if wanted else 0.0


def window_share(date_from: int, date_to: int, window: Window | None) -> float:
    """Share of [date_from, date_to] inside ``window`` (0 when no window)."""
    if window is None:
        return 0.0
    low, high = max(window[0], date_from), min(window[1], date_to)
    return 0.0 if low > high else (high - low + 1) / (date_to - date_from + 1)


def window_days(date_from: int, date_to: int, window: Window | None) -> float:
    """Days between [date_from, date_to] and ``window`` (0 overlapping or with no window)."""
    if window is None:
        return 0.0
    gap = max(window[0] - date_to, date_from - window[1], 0)
    return gap / _DAY_MS


def held_window(window: Window | None, top: Sequence[ScoredMemory]) -> Window | None:
    """``window``, or None when no memory of ``top`` falls in it: the question's time words
    then name no time the candidates hold (a question asked a year after what it means by
    "last month", without ``as_of``), and the window features would only tell how long ago
    each memory is. Read as a named time, such a window cost bench/stories.py's time
    questions asked without ``as_of``; LoCoMo's and LifeBench's windows nearly always hold
    a candidate (5 of 63 and 0 of 309 questions that name a time hold none)."""
    if window is None:
        return None
    if any(window_share(h.memory.date_from, h.memory.date_to, window) for h in top):
        return window
    return None


def overlap(a: set[str], b: set[str]) -> float:
    """Jaccard share of two word sets (0 when both are empty)."""
    return len(a & b) / len(a | b) if a or b else 0.0


def like_later(
    dates: Sequence[int], scores: Sequence[float], held: Sequence[set[str]]
) -> npt.NDArray[np.float32]:
    """For each candidate (its date_from, its fused score, its words): the
    newer_like and newest_like columns. ``newer_like`` is log(1 + days) to the latest like
    candidate said a day or more after it (0: none), ``newest_like`` 1 when it has like
    candidates (a day or more apart, either way) and none is later. Pure, quadratic in the
    candidates (at most ``learned.RERANK``).

    Not among :data:`FEATURES` yet: trained as two columns (with the newer statement of a
    generated update labelled above the older), the trees gave them 0.8 % of their gain, and
    the model they were part of missed the held-out multi-hop bar (docs/benchmarks.md, "A
    learned ranker": "The newer of two like statements")."""
    n = len(dates)
    out = np.zeros((n, 2), dtype=np.float32)
    best = max(scores, default=0.0)
    head = [s > 0 and s >= LIKE_HEAD * best for s in scores]
    for i in range(n):
        latest, others = 0, False
        for j in range(n):
            if abs(dates[j] - dates[i]) < _DAY_MS:
                continue
            low, high = sorted((scores[i], scores[j]))
            near = head[i] and head[j] and low >= LIKE_SCORE * high
            if not (near or overlap(held[i], held[j]) >= LIKE_WORDS):
                continue
            others = True
            latest = max(latest, dates[j] - dates[i])
        out[i] = (math.log1p(latest / _DAY_MS), float(others and not latest))
    return out


def _ranks(hits: Sequence[ScoredMemory]) -> dict[str, int]:
    return {h.memory.id: i for i, h in enumerate(hits)}


def _neighbours(ordered: Sequence[ScoredMemory]) -> dict[str, list[ScoredMemory]]:
    by_seq = {h.memory.seq: h for h in ordered if h.memory.tier == 1 and h.memory.seq}
    out: dict[str, list[ScoredMemory]] = {}
    for hit in ordered:
        m = hit.memory
        near = []
        for seq in (m.seq - 1, m.seq + 1):
            other = by_seq.get(seq) if m.seq and m.tier == 1 else None
            if (
                other is not None
                and other.memory.session_id == m.session_id
                and abs(other.memory.date_from - m.date_from) <= NEIGHBOUR_GAP_MS
            ):
                near.append(other)
        out[m.id] = near
    return out


def _day_best(top: Sequence[ScoredMemory]) -> list[float]:
    """Each candidate's best fused score among the other candidates of its day (0: none)."""
    best: dict[int, list[float]] = {}
    for h in top:
        two = best.setdefault(h.memory.date_from // _DAY_MS, [])
        two.append(h.score or 0.0)
        two.sort(reverse=True)
        del two[2:]
    out = []
    for h in top:
        two = best[h.memory.date_from // _DAY_MS]
        own = h.score or 0.0
        out.append(0.0 if len(two) < 2 else two[1] if two[0] == own else two[0])
    return out


def _text_columns(query: str, top: Sequence[ScoredMemory]) -> npt.NDArray[np.float32]:
    """terms_share, rare_share, names_share, numbers_share, bigrams and lead_name of each
    candidate (its words read once)."""
    q_words = words(query)
    terms = list(dict.fromkeys(q_words))
    wanted, names, numbers = set(terms), names_in(query), numbers_in(query)
    pairs = set(pairwise(q_words))
    held = [words(h.memory.content) for h in top]
    sets = [set(w) & wanted for w in held]
    df: dict[str, int] = {}
    for found in sets:
        for t in found:
            df[t] = df.get(t, 0) + 1
    n = len(top)
    weight = {t: math.log(1 + n / (1 + df.get(t, 0))) for t in terms}
    total = sum(weight.values()) or 1.0
    out = np.zeros((n, 6), dtype=np.float32)
    for i, found in enumerate(sets):
        out[i] = (
            len(found) / len(terms) if terms else 0.0,
            sum(weight[t] for t in found) / total,
            share(names, found),
            share(numbers, found),
            len(pairs & set(pairwise(held[i]))) if pairs else 0,
            float(bool(names.intersection(held[i][:3]))),
        )
    return out


def matrix(found: Candidates, count: int) -> npt.NDArray[np.float32]:
    """The feature rows (in :data:`FEATURES` order) of the first ``count`` of ``found.ordered``."""
    top = list(found.ordered[:count])
    n = len(top)
    rows = np.zeros((n, len(FEATURES)), dtype=np.float32)
    if not n:
        return rows
    lex_rank, dense_rank = _ranks(found.lexical), _ranks(found.dense)
    bm25 = {h.memory.id: h.score or 0.0 for h in found.lexical}
    cosine = {h.memory.id: h.score or 0.0 for h in found.dense}
    top_bm25 = max(bm25.values(), default=0.0)
    best_bm25 = top_bm25 or 1.0
    best_cos = max(cosine.values(), default=0.0)
    last_cos = min(cosine.values(), default=0.0)
    fused = {h.memory.id: h.score or 0.0 for h in top}
    near = _neighbours(top)
    day_best = _day_best(top)
    day_count: dict[int, int] = {}
    for h in top:
        day = h.memory.date_from // _DAY_MS
        day_count[day] = day_count.get(day, 0) + 1
    newest = max(h.memory.date_to for h in top)
    by_date = {h.memory.id: i for i, h in enumerate(sorted(top, key=lambda h: -h.memory.date_to))}
    window = held_window(found.named_time, top)
    terms = len(set(words(found.query)))
    for i, hit in enumerate(top):
        m = hit.memory
        cos = cosine.get(m.id, last_cos)
        score = bm25.get(m.id, 0.0)
        rows[i, :13] = (
            score,
            score / best_bm25,
            lex_rank.get(m.id, ABSENT_RANK),
            cos,
            best_cos - cos,
            dense_rank.get(m.id, ABSENT_RANK),
            float(m.id in bm25 and m.id in cosine),
            hit.score or 0.0,
            i,
            max((fused[o.memory.id] for o in near[m.id]), default=0.0),
            max((cosine.get(o.memory.id, last_cos) for o in near[m.id]), default=last_cos),
            day_best[i],
            day_count[m.date_from // _DAY_MS],
        )
        rows[i, 18:-1] = (
            math.log(1 + m.tokens),
            m.tier,
            m.importance or 0,
            float(m.role == "assistant"),
            found.lifted.get(m.id, 0.0),
            float(window is not None),
            window_share(m.date_from, m.date_to, window),
            window_days(m.date_from, m.date_to, window),
            math.log1p(max(0, newest - m.date_to) / _DAY_MS),
            by_date[m.id] / n,
            terms,
            top_bm25,
            best_cos,
        )
    text = _text_columns(found.query, top)
    rows[:, 13:18] = text[:, :5]
    rows[:, -1] = text[:, 5]
    return rows
