"""The pure rules: dates, tokens, chunking, selection, debt, the commit contract."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.limits import MOMENT, MOMENT_OFF_THE_EDGE
from mcp_memoryrouter.tokens import est_tokens
from mcp_memoryrouter.vault.rules import chunking, contract, debt, selection
from mcp_memoryrouter.vault.rules.dates import EARLIEST_MS, format_ms, parse_moment, to_ms
from mcp_memoryrouter.vault.rules.domain import Candidate, Counters, Entry


def test_est_tokens_is_ceil_of_chars_over_four() -> None:
    assert [est_tokens("a" * n) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


def test_date_only_is_start_of_utc_day_and_end_of_day_for_to_bounds() -> None:
    assert format_ms(parse_moment("2026-02-01", field="f")) == "2026-02-01T00:00:00.000Z"
    end = parse_moment("2026-02-01", field="f", end_of_day=True)
    assert format_ms(end) == "2026-02-01T23:59:59.999Z"


def test_offset_datetimes_are_converted_to_utc_milliseconds() -> None:
    ms = parse_moment("2026-02-01T04:11:09.123456+02:00", field="f")
    assert format_ms(ms) == "2026-02-01T02:11:09.123Z"
    assert format_ms(parse_moment("2026-02-01T04:11:09Z", field="f")) == "2026-02-01T04:11:09.000Z"


@pytest.mark.parametrize(
    "bad",
    [
        "yesterday",
        "2026-13-01",
        "",
        "2026-02-30",
        "12:00",
        # what Python's own parser takes, and the pattern /openapi.json carries does not
        " 2026-02-01",
        "2026-02-01\n",
        "20260201",
        "2026-W05-1",
        "2026-02-01T10",
        "2026-02-01T10:00:00+0100",
        "2026-02-01T10:00:00,5Z",
        # what RFC 3339 allows and Python's parser refuses
        "2026-02-01t10:00:00z",
        "2016-12-31T23:59:60Z",
        "0000-01-01",
        "\u0662\u0660\u0662\u0666-02-01",
    ],
)
def test_unparseable_dates_are_invalid_requests(bad: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_moment(bad, field="date")


@pytest.mark.parametrize(
    "edge", ["0001-01-01T00:00:00+01:00", "0001-01-01 23:00-00:30", "9999-12-31T20:00:00-05:00"]
)
def test_an_offset_on_the_first_or_last_day_of_years_1_to_9999_is_refused(edge: str) -> None:
    with pytest.raises(InvalidRequest):
        parse_moment(edge, field="date")
    # in UTC those days are read
    assert parse_moment(edge[:10] + "T00:00:00Z", field="date") % 86_400_000 == 0
    assert parse_moment(edge[:10] + "T12:00:00+00:00", field="date") % 86_400_000 == 43_200_000


def _is_a_day(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def test_the_moment_pattern_holds_exactly_the_days_of_the_calendar() -> None:
    for year in (1, 4, 99, 100, 400, 1600, 1700, 1900, 2000, 2023, 2024, 2100, 9996, 9999):
        for month, day in itertools.product(range(100), repeat=2):
            text = f"{year:04d}-{month:02d}-{day:02d}"
            assert bool(MOMENT.fullmatch(text)) is _is_a_day(text), text
    for year in range(10_000):  # every leap day there is, and no other
        text = f"{year:04d}-02-29"
        assert bool(MOMENT.fullmatch(text)) is _is_a_day(text), text


@given(st.from_regex(MOMENT, fullmatch=True))
def test_every_moment_the_pattern_allows_is_read_unless_off_the_edge(text: str) -> None:
    if MOMENT_OFF_THE_EDGE.fullmatch(text):
        with pytest.raises(InvalidRequest):
            parse_moment(text, field="date")
    else:
        moment = parse_moment(text, field="date")
        assert format_ms(moment) and moment >= EARLIEST_MS  # within 0001-9999 in UTC


@given(
    st.datetimes(
        timezones=st.sampled_from(
            [None, UTC, timezone(timedelta(hours=14)), timezone(-timedelta(hours=9, minutes=30))]
        )
    ),
    st.sampled_from(["T", " "]),
    st.sampled_from(["minutes", "seconds", "milliseconds", "microseconds"]),
)
def test_python_s_iso_datetimes_are_read_as_the_same_moment(
    moment: datetime, separator: str, timespec: str
) -> None:
    text = moment.isoformat(separator, timespec)
    if MOMENT_OFF_THE_EDGE.fullmatch(text):
        return
    written = datetime.fromisoformat(text)
    written = written if written.tzinfo else written.replace(tzinfo=UTC)
    assert parse_moment(text, field="date") == to_ms(written.astimezone(UTC))


def test_short_messages_stay_whole() -> None:
    text = "word " * 300
    assert chunking.split_message(text) == [text.strip()]


def test_long_messages_split_into_overlapping_units_of_about_300_tokens() -> None:
    sentence = "The deploy of service number {} finished after a long review. "
    text = "".join(sentence.format(i) for i in range(120))
    units = chunking.split_message(text)
    assert len(units) > 1
    assert all(est_tokens(u) <= 450 for u in units)
    assert all(u.endswith(".") for u in units[:-1])
    for before, after in itertools.pairwise(units):
        assert after[:20] in before  # the overlap repeats the end of the previous unit


@given(st.text(alphabet=st.sampled_from("ab .!\n\u00e9\U0001f600"), min_size=1900, max_size=6000))
def test_chunk_spans_cover_every_character_and_stay_within_the_unit_size(text: str) -> None:
    spans = chunking.unit_spans(text)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start <= end  # touching or overlapping: nothing skipped
    assert all(est_tokens(text[a:b]) <= 450 for a, b in spans)
    assert chunking.split_message(text) == [
        text[a:b].strip() for a, b in spans if text[a:b].strip()
    ]


def _rows(*spec: tuple[int, int | None]) -> list[Candidate]:
    return [Candidate(f"id{i}", tok, imp, i, i, "t") for i, (tok, imp) in enumerate(spec)]


def test_tier1_budget_takes_oldest_rows_while_the_total_fits() -> None:
    rule = selection.selection_for(1, None)
    chosen = selection.select(_rows(*[(20_000, None)] * 4), rule)
    assert [c.id for c in chosen] == ["id0", "id1"]


def test_a_single_row_larger_than_the_budget_forms_a_batch_alone() -> None:
    rule = selection.selection_for(1, 1_000)
    assert [c.id for c in selection.select(_rows((5_000, None), (10, None)), rule)] == ["id0"]


def test_max_tokens_is_clamped_to_1000_200000() -> None:
    assert selection.selection_for(1, 5).token_budget == 1_000
    assert selection.selection_for(2, 10**9).token_budget == 200_000
    assert selection.selection_for(2, 5_000).importance_target is None


def test_tier2_takes_reflections_until_importance_reaches_150_final_row_completes() -> None:
    rule = selection.selection_for(2, None)
    chosen = selection.select(_rows(*[(100, 7)] * 30), rule)
    assert len(chosen) == 22  # 21 * 7 = 147 < 150, the 22nd completes it
    assert sum(c.importance or 0 for c in chosen) == 154


def test_tier2_stops_at_the_10000_token_soft_cap() -> None:
    chosen = selection.select(_rows(*[(3_000, 1)] * 10), selection.selection_for(2, None))
    assert len(chosen) == 3


def test_debt_importance_equivalent_and_suggestions_follow_the_document() -> None:
    block = debt.debt_block(Counters(40_000, 13_200_000, 120, 640, 41_000))
    assert block["unconsolidated"]["raw"] == {
        "units": 40_000,
        "est_tokens": 13_200_000,
        "importance_equiv": 39_600,
    }
    assert block["suggestion"] == (
        "raw consolidation suggested: 39600 unconsolidated importance; "
        "tier 2 consolidation suggested: 640 unconsolidated importance"
    )
    assert debt.debt_block(Counters(1, 49_999, 3, 149, 10))["suggestion"] is None
    assert debt.debt_block(Counters(1, 50_000, 0, 0, 0))["suggestion"] == (
        "raw consolidation suggested: 150 unconsolidated importance"
    )


@pytest.mark.parametrize(
    "text",
    [
        "See 7c9e6679-7425-40de-944b-e07fc1f90ae7 for details.",
        "From batch cb_9f2c0000aaaabbbbccccdddd0000eeee.",
        "   ",
        "x" * 8001,
    ],
)
def test_entries_with_ids_or_bad_lengths_are_refused(text: str) -> None:
    with pytest.raises(InvalidRequest):
        contract.check_entries([Entry(text, 5)])


@pytest.mark.parametrize("importance", [0, 11, -3])
def test_importance_outside_1_to_10_is_refused(importance: int) -> None:
    with pytest.raises(InvalidRequest):
        contract.check_entries([Entry("ok", importance)])


def test_entry_count_must_be_1_to_100() -> None:
    with pytest.raises(InvalidRequest):
        contract.check_entries([])
    with pytest.raises(InvalidRequest):
        contract.check_entries([Entry("ok", 5)] * 101)
    assert contract.check_entries([Entry("  ok  ", 5)] * 100)[0].text == "ok"


def test_contract_instructions_differ_per_target_tier_and_carry_the_version() -> None:
    two, three = contract.reflection_contract(1), contract.reflection_contract(2)
    assert (two["target_tier"], three["target_tier"]) == (2, 3)
    assert two["instructions"] != three["instructions"]
    assert two["version"] == three["version"] == contract.CONTRACT_VERSION
    assert "WHAT" in two["instructions"] and "WHY" in three["instructions"]


def test_common_terms_are_pruned_only_in_large_indexes() -> None:
    from mcp_memoryrouter.vault.search.ranking import prune_common

    # Only terms in more than half of the memories go: BM25 gives them no weight at all.
    freq = {"the": 1_100, "team": 600, "release": 40, "ship": 5}
    assert prune_common(["the", "team", "release", "ship", "unknown"], freq, 2000) == [
        "team",
        "release",
        "ship",
        "unknown",
    ]
    assert prune_common(["the"], freq, 2000) == ["the"]  # all common: keep the rarest
    assert prune_common(["the", "ship"], freq, 999) == ["the", "ship"]  # small: keep all
