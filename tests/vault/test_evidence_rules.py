"""The rule of each entry's own evidence (``rules/evidence.py``): which sources are kept and
in what order, when support is weak, the lexical score, and the cited lines' bounds."""

from __future__ import annotations

import pytest

from mcp_memoryrouter import limits
from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.vault.rules.domain import Entry
from mcp_memoryrouter.vault.rules.evidence import (
    Scored,
    check_cites,
    lexical,
    rank,
    weak,
    words,
)


def scored(*scores: float) -> list[Scored]:
    """Sources on lines 1, 2, ... with these scores."""
    return [Scored(f"m{line}", line, score) for line, score in enumerate(scores, 1)]


def test_cited_lines_come_first_even_below_the_floor_then_the_rest_best_first() -> None:
    floor = limits.EVIDENCE_FLOOR_COSINE
    found = rank(scored(0.9, floor / 2, 0.7, floor + 0.01), [2], "cosine")
    assert [(e.memory_id, e.rank, e.cited) for e in found] == [
        ("m2", 1, True),
        ("m1", 2, False),
        ("m3", 3, False),
        ("m4", 4, False),
    ]
    assert [e.score for e in found] == [round(floor / 2, 4), 0.9, 0.7, round(floor + 0.01, 4)]


def test_uncited_sources_below_the_floor_are_left_out() -> None:
    floor = limits.EVIDENCE_FLOOR_LEXICAL
    found = rank(scored(floor - 0.01, floor, 0.0), [], "lexical")
    assert [e.memory_id for e in found] == ["m2"]


def test_at_most_the_bound_of_uncited_sources_is_kept_and_ties_go_by_line() -> None:
    found = rank(scored(*[0.95] * (limits.EVIDENCE_MAX + 3)), [], "cosine")
    assert [e.memory_id for e in found] == [f"m{i}" for i in range(1, limits.EVIDENCE_MAX + 1)]
    cited = rank(scored(*[0.95] * (limits.EVIDENCE_MAX + 3)), [11, 10], "cosine")
    assert [e.memory_id for e in cited[:2]] == ["m10", "m11"]
    assert len(cited) == limits.EVIDENCE_MAX + 2  # cited lines do not take the others' places


def test_support_is_weak_when_no_source_reaches_the_bound_cited_or_not() -> None:
    bound = limits.WEAK_SUPPORT_COSINE
    assert weak(scored(bound - 0.01, 0.1), "cosine")
    assert not weak(scored(0.1, bound), "cosine")
    assert weak([], "lexical")


def test_the_lexical_score_is_the_cosine_of_the_sets_of_content_words() -> None:
    assert words("The cat sat on the MAT, the cat!") == {"cat", "sat", "mat"}
    assert lexical(words("adopted a beagle called Rex"), words("Rex: beagle, called, adopted")) == 1
    assert lexical(words("adopted a beagle named Rex"), words("Rex the beagle was adopted")) > 0.8
    assert lexical(words("moved to Lisbon"), words("adopted a beagle")) == 0
    half = lexical(words("beagle puppy"), words("beagle kitten"))
    assert half == pytest.approx(0.5)
    assert lexical(frozenset(), words("anything")) == 0


def test_a_cited_line_outside_the_batch_is_refused_naming_the_entry() -> None:
    entries = [Entry("fine", 5, cites=(1, 3)), Entry("wrong", 5, cites=(2, 4))]
    check_cites(entries[:1], 3)
    with pytest.raises(InvalidRequest) as refused:
        check_cites(entries, 3)
    assert refused.value.details == {"field": "entries[1].cites"}
    with pytest.raises(InvalidRequest):
        check_cites([Entry("zero", 5, cites=(0,))], 3)
