"""The explorer's pure parts: the chart's buckets, links, the delete confirmation's words."""

from __future__ import annotations

from mcp_memoryrouter import schemas
from mcp_memoryrouter.asgi import host_allowed
from mcp_memoryrouter.ui import render

VIEWER = render.Viewer("vr_x", read_only=False, csrf="t")


def bucket(start: str, n: int = 1) -> schemas.TimelineBucket:
    return schemas.TimelineBucket(start=start, tiers={"1": n, "2": 0, "3": 0})


def test_the_chart_fills_gaps_and_stops_at_the_calendars_end() -> None:
    filled = render.fill_gaps([bucket("2026-01-01"), bucket("2026-04-01")], "month")
    assert [b.start for b in filled] == ["2026-01-01", "2026-02-01", "2026-03-01", "2026-04-01"]
    assert render.fill_gaps([bucket("9999-12-01")], "month")[-1].start == "9999-12-01"
    assert render.fill_gaps([bucket("9999-12-27")], "week")[-1].start == "9999-12-27"
    # a vault spanning millennia is drawn from its buckets as they are, not 100,000 bars
    sparse = [bucket("0001-01-01"), bucket("9999-12-01")]
    assert render.fill_gaps(sparse, "month") == sparse


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
    page = render.confirm_delete(["top"], alone, derived, VIEWER, "/ui")
    assert "Delete these and free their sources" in page
    assert "2 sources (2 at tier 2) return to the unconsolidated pool" in page


def test_a_moment_under_reflections_names_what_goes_with_it() -> None:
    alone = dry({"1": ["m"]}, {})
    derived = dry({"1": ["m"], "2": ["r"], "3": ["t"]}, {"1": 2, "2": 1})
    page = render.confirm_delete(["m"], alone, derived, VIEWER, "/ui")
    assert "Delete these and the 2 reflections built from them" in page
    assert "2 reflections built from them go too" in page


def test_nothing_above_and_nothing_freed_offers_one_button() -> None:
    alone = dry({"1": ["m"]}, {})
    page = render.confirm_delete(["m"], alone, dry({"1": ["m"]}, {}), VIEWER, "/ui")
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
