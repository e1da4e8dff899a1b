"""Hypothesis over the time a question names: phrases made of the parser's own words, with
any number (huge ones too) and any moment asked from (years 1 to 9999 and past them), give
a window inside the renderable years or none, never an exception. And the questions that
once answered 500 are answered, on the tools as on REST."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_memoryrouter.vault.rules.dates import format_ms, to_ms
from mcp_memoryrouter.vault.rules.when import _MONTHS, _NUMBERS, window_in
from tests.support.tools import ToolHarness, assert_clean, call

FIRST_MS = to_ms(datetime(1, 1, 1, tzinfo=UTC))
LAST_MS = to_ms(datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC))
UNITS = ["day", "days", "week", "weeks", "month", "months", "year", "years"]
NUMBERS = st.one_of(
    st.integers(min_value=0, max_value=10_000),
    st.integers(min_value=0, max_value=10**40),
    st.sampled_from([0, 1, 2020, 3000, 7999, 8000, 9998, 9999, 10_000, 10**9]),
)
NUMBER_WORDS = st.one_of(
    NUMBERS.map(str),
    st.just("9" * 5000),  # more digits than int() converts
    st.sampled_from([*_NUMBERS, "a couple of", "a few"]),
)
YEARS = st.one_of(st.integers(0, 9999).map(lambda y: f"{y:04d}"), NUMBERS.map(str))
MONTHS = st.sampled_from(sorted(_MONTHS))
PHRASES = st.one_of(
    st.tuples(NUMBER_WORDS, st.sampled_from(UNITS)).map(lambda p: f"{p[0]} {p[1]} ago"),
    st.tuples(st.sampled_from(["last", "this", "past"]), st.sampled_from(UNITS[::2])).map(" ".join),
    st.sampled_from(["yesterday", "today"]),
    st.tuples(
        st.sampled_from(["in", "during", "since", "back in", "on"]),
        MONTHS,
        st.sampled_from(["", " 3", " 31st", " 29th"]),
        st.one_of(st.just(""), YEARS.map(lambda y: f", {y}"), YEARS.map(lambda y: f" {y}")),
    ).map(lambda p: f"{p[0]} {p[1]}{p[2]}{p[3]}"),
    st.tuples(st.sampled_from(["in", "during", "back in"]), YEARS).map(" ".join),
)
# any of the words above, in any order
WORDS = st.lists(
    st.one_of(
        MONTHS,
        NUMBER_WORDS,
        st.sampled_from([*UNITS, "ago", "last", "this", "past", "in", "on", "since", "of"]),
    ),
    max_size=6,
).map(" ".join)
AS_OF = st.one_of(
    st.integers(FIRST_MS, LAST_MS),
    st.sampled_from([FIRST_MS, FIRST_MS + 1, LAST_MS - 1, LAST_MS, 0, -1]),
    st.integers(-(2**70), 2**70),
)


def assert_renderable(window: tuple[int, int] | None) -> None:
    if window is None:
        return
    start, end = window
    assert FIRST_MS <= start <= end <= LAST_MS
    assert format_ms(start) <= format_ms(end)  # both can be rendered


@settings(max_examples=500, deadline=None, derandomize=True)
@given(question=st.one_of(PHRASES, WORDS), as_of=AS_OF)
def test_any_phrase_at_any_moment_names_a_renderable_window_or_none(
    question: str, as_of: int
) -> None:
    assert_renderable(window_in(f"what happened {question}?", as_of))


@pytest.mark.parametrize(
    ("question", "as_of", "window"),
    [
        ("3000 years ago", "2026-06-15", None),
        ("30000 months ago", "2026-06-15", None),
        ("in december 9999", "2026-06-15", ("9999-12-01", "9999-12-31")),
        ("last year", "0001-01-01", None),
        ("yesterday", "0001-01-01", None),
        ("past week", "0001-01-03", ("0001-01-01", "0001-01-03")),
        ("this year", "9999-12-31", ("9999-01-01", "9999-12-31")),
        ("today", "9999-12-31", ("9999-12-31", "9999-12-31")),
        ("in january 0000", "2026-06-15", None),
    ],
)
def test_a_time_past_the_renderable_years_is_clamped_or_names_none(
    question: str, as_of: str, window: tuple[str, str] | None
) -> None:
    moment = to_ms(datetime.fromisoformat(as_of).replace(tzinfo=UTC))
    found = window_in(question, moment)
    days = None if found is None else (format_ms(found[0])[:10], format_ms(found[1])[:10])
    assert days == window


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "what did I do 3000 years ago"},
        {"query": "plans in december 9999"},
        {"query": "what did I read last year", "as_of": "0001-01-01"},
        {"query": "what happened this year", "as_of": "9999-12-31T23:59:59Z"},
    ],
)
def test_searching_a_time_out_of_range_is_a_result_not_an_error(
    tools: ToolHarness, arguments: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        result = call(tools, "search_memories", arguments)
    assert_clean("search_memories", result)
    assert not result.is_error
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
