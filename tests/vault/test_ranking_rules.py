"""The pure rules behind a page that covers the story: the time a question names, near ties
given to the newer fact, and the spread over stories."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mcp_memoryrouter.vault.rules.dates import format_ms, to_ms
from mcp_memoryrouter.vault.rules.domain import Memory, ScoredMemory
from mcp_memoryrouter.vault.rules.when import window_in
from mcp_memoryrouter.vault.search.ranking import in_time, newer_first, spread

NOW = to_ms(datetime(2026, 6, 15, 14, 30, tzinfo=UTC))  # a Monday


def named(question: str, as_of: int = NOW) -> tuple[str, str] | None:
    found = window_in(question, as_of)
    return None if found is None else (format_ms(found[0])[:10], format_ms(found[1])[:10])


@pytest.mark.parametrize(
    ("question", "window"),
    [
        ("what did I cook last month?", ("2026-05-01", "2026-05-31")),
        ("What did I cook in May?", ("2026-05-01", "2026-05-31")),
        ("what happened in July?", ("2025-07-01", "2025-07-31")),  # the latest July, last year
        ("what happened in March 2024", ("2024-03-01", "2024-03-31")),
        ("who did I meet on May 3, 2023?", ("2023-05-01", "2023-05-31")),
        ("what did I do on July 4th?", ("2025-07-01", "2025-07-31")),
        ("where was I two weeks ago", ("2026-05-29", "2026-06-04")),
        ("what did I eat 3 days ago", ("2026-06-12", "2026-06-12")),
        ("about a month ago", ("2026-05-01", "2026-05-31")),
        ("a couple of years ago", ("2024-01-01", "2024-12-31")),
        ("what did I say yesterday", ("2026-06-14", "2026-06-14")),
        ("anything today?", ("2026-06-15", "2026-06-15")),
        ("plans for this week", ("2026-06-15", "2026-06-21")),
        ("what did we do last week", ("2026-06-08", "2026-06-14")),
        ("over the past month", ("2026-05-16", "2026-06-15")),
        ("what did I read last year", ("2025-01-01", "2025-12-31")),
        ("the trip in 2023", ("2023-01-01", "2023-12-31")),
    ],
)
def test_a_question_names_a_window_relative_to_as_of(
    question: str, window: tuple[str, str]
) -> None:
    assert named(question) == window


def test_last_month_in_january_is_last_years_december() -> None:
    assert named("last month", to_ms(datetime(2026, 1, 10, tzinfo=UTC))) == (
        "2025-12-01",
        "2025-12-31",
    )


@pytest.mark.parametrize(
    "question",
    ["where do I live", "what may I bring", "my mayor", "I marched on", "the 2 weeks plan"],
)
def test_a_question_without_a_time_names_no_window(question: str) -> None:
    assert named(question) is None


def hit(
    memory_id: str, score: float, day: int, tier: int = 1, session: str | None = None
) -> ScoredMemory:
    moment = to_ms(datetime(2026, 1, day, tzinfo=UTC))
    memory = Memory(memory_id, tier, memory_id, 10, moment, moment, session_id=session)  # type: ignore[arg-type]
    return ScoredMemory(memory, score)


def ids(hits: list[ScoredMemory]) -> list[str]:
    return [h.memory.id for h in hits]


def test_a_near_tie_goes_to_the_newer_and_scores_stay() -> None:
    ordered = newer_first([hit("old", 1.0, 1), hit("new", 0.97, 20), hit("far", 0.5, 25)])
    assert ids(ordered) == ["new", "old", "far"]
    assert [h.score for h in ordered] == [0.97, 1.0, 0.5]


@pytest.mark.parametrize(
    "hits",
    [
        [hit("old", 1.0, 1), hit("new", 0.9, 20)],  # not a tie: 10 % apart
        [hit("old", 1.0, 1, tier=2), hit("new", 0.99, 20)],  # another tier
        [hit("old", 1.0, 1), hit("new", 0.99, 1)],  # the same day: turns of one talk
    ],
)
def test_what_is_not_a_near_tie_keeps_its_order(hits: list[ScoredMemory]) -> None:
    assert ids(newer_first(hits)) == ["old", "new"]


def test_a_time_window_boosts_but_does_not_filter() -> None:
    window = (to_ms(datetime(2026, 1, 10, tzinfo=UTC)), to_ms(datetime(2026, 1, 11, tzinfo=UTC)))
    ordered = in_time([hit("out", 1.0, 1), hit("in", 0.8, 10)], window)
    assert ids(ordered) == ["in", "out"]
    assert [h.score for h in ordered] == [pytest.approx(1.2), 1.0]


def test_a_page_spreads_over_sessions_when_scores_are_close() -> None:
    hits = [hit(f"a{i}", 1.0 - i / 100, 1, session="a") for i in range(5)]
    hits += [hit("b", 0.9, 2, session="b"), hit("c", 0.88, 3, session="c")]
    page = spread(hits, 4)
    assert ids(page) == ["a0", "b", "c", "a1"]


def test_a_clearly_better_session_still_fills_the_page() -> None:
    hits = [hit(f"a{i}", 1.0 - i / 100, 1, session="a") for i in range(3)]
    hits.append(hit("b", 0.3, 2, session="b"))
    assert ids(spread(hits, 3)) == ["a0", "a1", "a2"]


def test_spread_keeps_an_order_given_to_the_newer() -> None:
    hits = newer_first([hit("old", 1.0, 1, session="x"), hit("new", 0.97, 20, session="y")])
    assert ids(spread(hits, 2)) == ["new", "old"]


def test_after_the_head_the_page_follows_the_score() -> None:
    hits = [hit(f"a{i}", 1.0 - i / 100, 1, session="a") for i in range(8)]
    hits += [hit(f"s{i}", 0.9 - i / 100, 2 + i, session=f"s{i}") for i in range(6)]
    page = ids(spread(hits, 10))
    assert page[:5] == ["a0", "s0", "s1", "s2", "s3"]  # the head spreads over sessions
    assert page[5:] == ["a1", "a2", "a3", "a4", "a5"]  # then the best of the rest, in order


def test_the_decay_is_on_the_scale_of_the_scores() -> None:
    # probabilities: the best is several times the next; 0.85 leaves the head to one session
    hits = [hit("a0", 0.6, 1, session="a"), hit("a1", 0.3, 1, session="a")]
    hits += [hit("b", 0.15, 2, session="b"), hit("c", 0.12, 3, session="c")]
    assert ids(spread(hits, 3)) == ["a0", "a1", "b"]
    assert ids(spread(hits, 3, decay=0.35)) == ["a0", "b", "c"]


def test_past_the_head_a_weak_hit_yields_to_another_storys() -> None:
    hits = [hit(f"s{i}", 0.9 - i / 100, 1 + i, session=f"s{i}") for i in range(5)]
    hits += [hit(f"a{i}", 0.015 - i / 1000, 10, session="a") for i in range(4)]
    hits.append(hit("b", 0.01, 12, session="b"))
    assert ids(spread(hits, 8))[5:] == ["a0", "a1", "a2"]  # nothing weak: in order
    page = ids(spread(hits, 8, decay=0.35, weak=0.02))
    assert page[:5] == [f"s{i}" for i in range(5)]
    assert page[5:] == ["a0", "b", "a1"]  # a's second weak hit yields to b's
    assert ids(spread(hits, 8, decay=0.35, weak=0.005))[5:] == ["a0", "a1", "a2"]  # not weak


def test_a_reflection_gains_by_the_share_of_its_coverage_in_the_window() -> None:
    day = 86_400_000
    start = to_ms(datetime(2026, 1, 1, tzinfo=UTC))
    window = (start + 9 * day, start + 19 * day - 1)  # ten days
    wide = Memory("wide", 2, "wide", 10, start, start + 29 * day - 1)  # 29 days
    inside = Memory("inside", 2, "inside", 10, *window)
    found = in_time([ScoredMemory(wide, 1.0), ScoredMemory(inside, 1.0)], window)
    boosted = {h.memory.id: h.score for h in found}
    assert boosted["inside"] == pytest.approx(1.5)
    assert boosted["wide"] == pytest.approx(1 + 0.5 * 10 / 29)
