"""Each entry's own evidence (docs/consolidation.md, "Each entry's own evidence"): which
sources of its batch support one committed entry, best first, and when that support is weak.

Every source of the batch gets a score against the entry: the cosine of their vectors in the
vault's default embedding model when the server has one (``"cosine"``), else the lexical
score below (``"lexical"``). The lines the entry cites come first (by score), then the other
sources at or above the scoring's floor, best first, at most ``limits.EVIDENCE_MAX`` of them.
An entry is *weakly supported* when no source of its batch reaches the scoring's weak bound,
cited or not. The floors and bounds are measured (``python bench/evidence.py``, figures in
docs/benchmarks.md).

The lexical score of an entry and a source is the cosine of their sets of words: the
distinct lower-cased words of at least three letters or digits, common function words left
out, counted once each; shared words over the square root of the product of the two sizes
(0 when either has no word). It needs no model and ignores word order and frequency.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from mcp_memoryrouter import limits
from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.vault.rules.domain import Entry
from mcp_memoryrouter.words import counted

Scoring = Literal["cosine", "lexical"]
FLOOR: dict[Scoring, float] = {
    "cosine": limits.EVIDENCE_FLOOR_COSINE,
    "lexical": limits.EVIDENCE_FLOOR_LEXICAL,
}
WEAK: dict[Scoring, float] = {
    "cosine": limits.WEAK_SUPPORT_COSINE,
    "lexical": limits.WEAK_SUPPORT_LEXICAL,
}

_WORD = re.compile(r"[^\W_]{3,}")
_COMMON = frozenset(
    re.findall(
        r"\w+",
        "the and for are but not you your yours our ours she her hers him his its they them "
        "their this that these those was were been being have has had with from into onto "
        "over about than then there here what which who whom when where why how all any each "
        "some can could will would shall should may might must just also very too out off one",
    )
)


@dataclass(frozen=True)
class Scored:
    """One source of the batch, its line in the checkout's text (None: checked out before
    lines were kept) and its score against the entry."""

    memory_id: str
    line: int | None
    score: float


@dataclass(frozen=True)
class Evidence:
    """A source kept as an entry's evidence: its rank (1 first), score, and whether cited."""

    memory_id: str
    rank: int
    score: float
    cited: bool


def check_cites(entries: Sequence[Entry], lines: int) -> None:
    """Refuse a cited line outside the batch's ``lines`` (1-based), naming the entry."""
    for index, entry in enumerate(entries):
        outside = [line for line in entry.cites if not 1 <= line <= lines]
        if outside:
            raise InvalidRequest(
                f"cites names line {outside[0]}, but the batch holds "
                f"{counted(lines, 'line', 'lines')}: cite the 1-based line numbers of the "
                "batch's memories in the checkout text, or leave cites out",
                {"field": f"entries[{index}].cites"},
            )


def words(text: str) -> frozenset[str]:
    """What the lexical score compares: distinct lower-cased words, common ones left out."""
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _COMMON)


def lexical(entry: frozenset[str], source: frozenset[str]) -> float:
    """The cosine of two sets of :func:`words`."""
    if not entry or not source:
        return 0.0
    return len(entry & source) / math.sqrt(len(entry) * len(source))


def rank(sources: Sequence[Scored], cites: Sequence[int], scoring: Scoring) -> list[Evidence]:
    """An entry's evidence among its batch's scored ``sources``: the cited lines first, then
    the others at or above the floor, best first (at most ``EVIDENCE_MAX``); ties by line."""
    cited = set(cites)

    def order(s: Scored) -> tuple[float, int, str]:
        return (-s.score, s.line or 0, s.memory_id)

    named = sorted((s for s in sources if s.line in cited), key=order)
    others = sorted(
        (s for s in sources if s.line not in cited and s.score >= FLOOR[scoring]), key=order
    )[: limits.EVIDENCE_MAX]
    return [
        Evidence(s.memory_id, place, round(s.score, 4), s.line in cited)
        for place, s in enumerate([*named, *others], 1)
    ]


def weak(sources: Sequence[Scored], scoring: Scoring) -> bool:
    """Whether no source of the batch supports the entry well enough (none reaches the
    scoring's weak bound)."""
    return max((s.score for s in sources), default=0.0) < WEAK[scoring]
