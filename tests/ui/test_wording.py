"""What the pages say in words: the dates a timeline page shows are those of its rows (never
the epoch an unset bound stands for), the order says where reflections stand, and a
reflection's sources are counted in words that agree."""

from __future__ import annotations

from playwright.sync_api import BrowserContext, Page, expect

from tests.support.oauth import OAuthServer
from tests.support.ui import Seeded, api, needs_browser, sign_in

pytestmark = needs_browser


def signed_in_page(context: BrowserContext, server: OAuthServer) -> Page:
    page = context.new_page()
    sign_in(page, server, server.key)
    return page


def test_a_timeline_without_dates_names_the_span_of_its_rows_never_1970(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = signed_in_page(context, server)
    page.goto(server.base + "/ui/timeline")
    note = page.locator("#results-h + p.note")
    expect(note).to_contain_text("This page: 2026-03-02 00:00 to 2026-07-28 12:15.")
    assert "1970" not in page.locator("main").inner_text()
    page.goto(server.base + "/ui/timeline?to=2026-05-31&order=oldest_first")
    expect(note).to_contain_text("This page: 2026-03-02 00:00 to 2026-05-04 09:00.")


def test_the_timeline_says_where_reflections_stand_in_each_order(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = signed_in_page(context, server)
    page.goto(server.base + "/ui/timeline")
    note = page.locator("#results-h + p.note")
    expect(note).to_contain_text("Newest first; a reflection stands at the start of the time")
    rows = page.locator("ul.memories li.memory")
    texts = rows.evaluate_all("li => li.map(x => x.className)")
    # the reflections follow the moments they were built from, as the note says
    assert texts.index("memory t3") > texts.index("memory t2")
    page.goto(server.base + "/ui/timeline?order=oldest_first")
    expect(note).to_contain_text("Oldest first; a reflection stands at the end of the time")


def test_a_reflection_counts_its_sources_and_says_which_are_listed(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = signed_in_page(context, server)
    page.goto(server.base + f"/ui/memories/{seeded.tier3}")
    summary = page.locator("#sources-summary")
    expect(summary).to_have_text("2 sources. All 2 are listed below, each one its evidence.")
    deleted = seeded.raw["garden"][0]
    api(server, "POST", "/v1/memory/delete-ids", server.key, ids=[deleted])
    page.goto(server.base + f"/ui/memories/{seeded.tier2['garden']}")
    expect(summary).to_have_text(
        "3 sources, 1 of them deleted. The 2 left are listed below, each one its evidence."
    )
