"""The explorer's pure parts: the chart's buckets and geometry, links, the gauges, the delete
confirmation's counts (ui/views.py, worked out before any HTML) and words."""

from __future__ import annotations

import pytest

from mcp_memoryrouter import schemas
from mcp_memoryrouter.edge.requests import host_allowed
from mcp_memoryrouter.ui import render, render_memory, render_overview, views

VIEWER = render.Viewer("vr_x", read_only=False, csrf="t")


def bucket(start: str, n: int = 1) -> schemas.TimelineBucket:
    return schemas.TimelineBucket(start=start, tiers={"1": n, "2": 0, "3": 0})


def test_the_chart_fills_gaps_and_stops_at_the_calendars_end() -> None:
    filled = views.fill_gaps([bucket("2026-01-01"), bucket("2026-04-01")], "month")
    assert [b.start for b in filled] == ["2026-01-01", "2026-02-01", "2026-03-01", "2026-04-01"]
    assert views.fill_gaps([bucket("9999-12-01")], "month")[-1].start == "9999-12-01"
    assert views.fill_gaps([bucket("9999-12-27")], "week")[-1].start == "9999-12-27"
    # a vault spanning millennia is drawn from its buckets as they are, not 100,000 bars
    sparse = [bucket("0001-01-01"), bucket("9999-12-01")]
    assert views.fill_gaps(sparse, "month") == sparse


def test_links_quote_ids() -> None:
    assert render.memory_url("a/b?c") == "/ui/memories/a%2Fb%3Fc"


def dry(by_tier: dict[str, list[str]], pool: dict[str, int]) -> schemas.DeleteIdsResponse:
    counters = {
        "unconsolidated": {
            "raw": {"units": 0, "est_tokens": 0, "importance_equiv": 0},
            "tier2": {"count": 0, "importance": 0, "est_tokens": 0},
        },
        "threshold_tokens": 50000,
        "threshold_importance": 150,
        "suggestion": None,
    }
    return schemas.DeleteIdsResponse.model_validate(
        {
            "requested": 1,
            "deleted": 0,
            "do_deleted": 0,
            "not_found": 0,
            "legacy_fallback_used": 0,
            "failed": [],
            "dry_run": True,
            "by_tier": by_tier,
            "returned_to_pool": pool,
            "reflection": counters,
        }
    )


def test_a_selected_reflection_is_offered_the_derived_delete_that_frees_its_sources() -> None:
    alone = dry({"3": ["top"]}, {})
    derived = dry({"3": ["top"]}, {"2": 2})
    page = render_memory.confirm_delete(["top"], alone, derived, VIEWER, "/ui")
    assert "Delete these and free their sources" in page
    assert "2 sources (2 at tier 2) return to the unconsolidated pool" in page


def test_a_moment_under_reflections_names_what_goes_with_it() -> None:
    alone = dry({"1": ["m"]}, {})
    derived = dry({"1": ["m"], "2": ["r"], "3": ["t"]}, {"1": 2, "2": 1})
    page = render_memory.confirm_delete(["m"], alone, derived, VIEWER, "/ui")
    assert "Delete these and the 2 reflections built from them" in page
    assert "2 reflections built from them go too" in page


def test_nothing_above_and_nothing_freed_offers_one_button() -> None:
    alone = dry({"1": ["m"]}, {})
    page = render_memory.confirm_delete(["m"], alone, dry({"1": ["m"]}, {}), VIEWER, "/ui")
    assert 'value="yes"' not in page


def test_hosts_match_exactly_or_by_any_port() -> None:
    allowed = ["127.0.0.1:*", "localhost:*", "[::1]:*", "memory.example.com"]
    assert host_allowed("127.0.0.1:8787", allowed)
    assert host_allowed("[::1]:8787", allowed)
    assert host_allowed("memory.example.com", allowed)
    assert not host_allowed("memory.example.com:8443", allowed)
    assert not host_allowed("attacker.example:8787", allowed)
    assert not host_allowed("127.0.0.1.attacker.example", allowed)
    assert not host_allowed("", allowed)


def test_a_moment_under_two_reflections_takes_them_and_frees_their_other_sources() -> None:
    alone = dry({"1": ["m"]}, {})
    derived = dry({"1": ["m"], "3": ["t"], "2": ["r"]}, {"2": 1, "1": 2})
    plan = views.delete_plan(["m"], alone, derived)
    assert (plan.selected, plan.gone, plan.found) == (1, 0, 1)
    assert (plan.above, plan.freed) == (2, 3)
    assert plan.returned == (("1", 2), ("2", 1))
    assert plan.listing == ((1, "m"), (2, "r"), (3, "t"))
    assert plan.known and plan.offer_derived


def test_a_selected_reflection_is_not_counted_as_built_from_the_selection() -> None:
    plan = views.delete_plan(["top"], dry({"3": ["top"]}, {}), dry({"3": ["top"]}, {"2": 2}))
    assert (plan.above, plan.freed) == (0, 2)
    assert plan.offer_derived  # it frees sources: the derived delete does more


def test_ids_already_gone_are_not_counted_as_found_and_zero_returns_are_left_out() -> None:
    alone = dry({"1": ["a"]}, {})
    alone.not_found = 2
    plan = views.delete_plan(["a", "b", "c"], alone, dry({"1": ["a"]}, {"1": 0, "2": 0}))
    assert (plan.selected, plan.gone, plan.found) == (3, 2, 1)
    assert plan.returned == () and plan.freed == 0
    assert not plan.offer_derived  # nothing above, nothing freed: one button


def test_a_vault_that_cannot_dry_run_is_offered_both_deletes() -> None:
    plan = views.delete_plan(["a", "b"], None, None)
    assert not plan.known and plan.offer_derived
    assert (plan.found, plan.above, plan.freed, plan.listing) == (2, 0, 0, ())


def test_the_chart_stacks_tiers_from_the_bottom_and_leaves_gaps_empty() -> None:
    timeline = schemas.TimelineResponse(
        vault="v",
        bucket="month",
        buckets=[
            schemas.TimelineBucket(start="2026-01-01", tiers={"1": 3, "2": 1, "3": 0}),
            schemas.TimelineBucket(start="2026-03-01", tiers={"1": 0, "2": 0, "3": 2}),
        ],
    )
    drawn = views.chart(timeline)
    assert drawn is not None
    assert (drawn.first, drawn.last, drawn.peak, drawn.width) == (
        "2026-01-01",
        "2026-03-01",
        4,
        240,
    )
    assert [(b.start, b.tier, b.n) for b in drawn.bars] == [
        ("2026-01-01", "1", 3),
        ("2026-01-01", "2", 1),
        ("2026-03-01", "3", 2),
    ]
    one, two, three = drawn.bars
    full = views.CHART_HEIGHT - 4
    assert one.y + one.height == views.CHART_HEIGHT and two.y + two.height == one.y
    assert one.height + two.height == pytest.approx(full)  # the peak bucket fills the height
    assert three.height == pytest.approx(full / 2)
    assert three.x == pytest.approx(2 * 80 + 1) and one.width == pytest.approx(78)
    assert views.chart(timeline.model_copy(update={"buckets": []})) is None


def test_a_gauge_reaches_at_least_its_threshold_and_is_low_below_half() -> None:
    debt = dry({}, {}).reflection.model_copy(deep=True)
    debt.unconsolidated.raw.importance_equiv = 400
    raw, tier2 = views.gauges(debt)
    assert (raw.value, raw.threshold, raw.high, raw.low) == (400, 150, 400, 75)
    assert (tier2.value, tier2.high) == (0, 150)
    assert raw.detail == "0 moments, about 0 tokens"


def test_a_gauge_counts_one_moment_and_one_reflection_in_the_singular() -> None:
    debt = dry({}, {}).reflection.model_copy(deep=True)
    debt.unconsolidated.raw.units, debt.unconsolidated.raw.est_tokens = 1, 9
    debt.unconsolidated.tier2.count, debt.unconsolidated.tier2.est_tokens = 1, 18
    raw, tier2 = views.gauges(debt)
    assert raw.detail == "1 moment, about 9 tokens"
    assert tier2.detail == "1 reflection, about 18 tokens"


@pytest.mark.parametrize(
    ("fields", "paged", "said"),
    [
        (
            {"sources_total": 4, "sources_deleted": 4, "orphaned": True},
            False,
            "4 sources, 4 of them deleted: every source is gone, this reflection stands alone.",
        ),
        (
            {"sources_total": 3, "sources_deleted": 2, "sources": 1},
            False,
            "3 sources, 2 of them deleted. The one left is listed below.",
        ),
        (
            {"sources_total": 2, "sources": 2},
            False,
            "2 sources. All 2 are listed below, most similar first.",
        ),
        (
            {"sources_total": 9, "sources_deleted": 1, "sources": 2, "offset": 4},
            True,
            "9 sources, 1 of them deleted. Listed below: 5 to 6 of the 8, most similar first.",
        ),
        ({"sources_total": 0}, False, "0 sources."),
    ],
)
def test_the_sources_summary_counts_what_is_left_and_what_is_listed(
    fields: dict[str, object], paged: bool, said: str
) -> None:
    n = int(str(fields.pop("sources", 0)))
    sources = [
        schemas.LineageRow(id=f"s{i}", tier=1, content="c", role=None, importance=None, date="d")
        for i in range(n)
    ]
    found = schemas.InspectResponse.model_validate(
        {"memory_id": "r", "tier": 2, "content": "c", "date": "d", "sources": sources, **fields}
    )
    assert views.sources_summary(found, paged=paged) == said


def test_the_button_says_why_the_servers_last_run_failed_and_when_it_tries_again() -> None:
    offer = views.ConsolidateNow(
        action="/ui/consolidate",
        failed="ProviderFailure: the model provider answered HTTP <500>",
        next_run="2026-03-01T10:15:00.000Z",
    )
    shown = render_overview.consolidate_now(offer, VIEWER)
    assert (
        "committed nothing: ProviderFailure: the model provider answered HTTP &lt;500&gt;." in shown
    )
    assert "The next write after 2026-03-01 10:15 (UTC) tries again." in shown
    assert "<button" in shown
    assert 'id="reflector-failed"' not in render_overview.consolidate_now(
        views.ConsolidateNow(action="/ui/consolidate"), VIEWER
    )


def test_a_reflections_page_lists_its_evidence_first_and_flags_weak_support() -> None:
    def row(i: int, evidence: schemas.EvidenceMark | None = None) -> schemas.LineageRow:
        return schemas.LineageRow(
            id=f"s{i}", tier=1, content=f"c{i}", role=None, importance=None, date="d",
            evidence=evidence,
        )  # fmt: skip

    cited = schemas.EvidenceMark(rank=1, score=0.8125, cited=True)
    found = schemas.InspectResponse(
        memory_id="r", tier=2, content="c", date="d", sources_total=3, evidence_total=1,
        weak_support=True, sources=[row(0, cited), row(1), row(2)], offset=0,
    )  # fmt: skip
    said = "3 sources. All 3 are listed below, its evidence first (1 source), then the rest."
    assert views.sources_summary(found, paged=False) == said
    html = render_memory.memory_page(found, VIEWER, next_offset=None)
    assert html.count('class="evidence"') == 1 and "evidence 0.812, cited" in html
    assert 'class="note weak-support"' in html
    steady = found.model_copy(update={"weak_support": None})
    assert "weak-support" not in render_memory.memory_page(steady, VIEWER, next_offset=None)


def test_the_delete_offers_the_reflections_evidence_supports_when_fewer_go() -> None:
    alone = dry({"1": ["m"]}, {})
    both = {"1": ["m"], "2": ["a", "b"]}
    derived = dry(both, {"1": 3}).model_copy(
        update={
            "choices": {
                "lineage": schemas.DeleteChoice(by_tier=both, returned_to_pool={"1": 3}),
                "evidence": schemas.DeleteChoice(
                    by_tier={"1": ["m"], "2": ["a"]}, returned_to_pool={}
                ),
            }
        }
    )
    plan = views.delete_plan(["m"], alone, derived)
    assert (plan.above, plan.by_evidence, plan.offer_evidence) == (2, 1, True)
    page = render_memory.confirm_delete(["m"], alone, derived, VIEWER, "/ui")
    assert 'name="derived" value="evidence"' in page
    assert "Delete these and the 1 reflection their evidence supports" in page
    assert derived.choices is not None
    same = derived.model_copy(update={"choices": {"evidence": derived.choices["lineage"]}})
    assert 'value="evidence"' not in render_memory.confirm_delete(["m"], alone, same, VIEWER, "/ui")
