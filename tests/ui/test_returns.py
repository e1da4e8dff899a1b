"""After a delete, the person is back where they started it: the search with its words and
its length, or, from a memory's own page, the page they opened it from, else the reflection
built from it. Cancel goes back to the page the delete was started from."""

from __future__ import annotations

from playwright.sync_api import BrowserContext, Page, expect

from tests.support.oauth import OAuthServer
from tests.support.ui import Seeded, needs_browser, sign_in

pytestmark = needs_browser


def signed_in_page(context: BrowserContext, server: OAuthServer) -> Page:
    page = context.new_page()
    sign_in(page, server, server.key)
    return page


def delete_only_this(page: Page) -> None:
    page.get_by_role("button", name="Delete this memory…").click()
    page.get_by_role("button", name="Delete only these (1)").click()
    expect(page.get_by_role("status").first).to_contain_text("Deleted 1 memory.")


def test_a_delete_from_the_search_page_stays_on_it_with_its_words_and_length(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = signed_in_page(context, server)
    searched = server.base + "/ui/search?q=shopping+list&tier=1&limit=3"
    page.goto(searched)
    page.locator('input[name="ids"]').first.check()
    page.get_by_role("button", name="Delete selected…").click()
    page.get_by_role("button", name="Delete only these (1)").click()
    expect(page.get_by_role("status").first).to_contain_text("Deleted 1 memory.")
    assert page.url == searched


def test_a_memory_opened_from_a_search_returns_to_that_search_once_deleted(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = signed_in_page(context, server)
    searched = server.base + "/ui/search?q=tomatoes+basil+garden&tier=1"
    page.goto(searched)
    page.locator("ul.memories li.memory a.text").first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Tier 1 moment")
    delete_only_this(page)
    assert page.url == searched


def test_a_memory_opened_directly_returns_to_the_reflection_built_from_it(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = signed_in_page(context, server)
    page.goto(server.base + f"/ui/memories/{seeded.raw['garden'][0]}")
    delete_only_this(page)
    assert page.url == server.base + f"/ui/memories/{seeded.tier2['garden']}"
    expect(page.locator("#sources-summary")).to_contain_text("3 sources, 1 of them deleted")


def test_cancel_goes_back_to_the_memory_whose_delete_was_asked(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = signed_in_page(context, server)
    moment = server.base + f"/ui/memories/{seeded.raw['cycling'][1]}"
    page.goto(moment)
    page.get_by_role("button", name="Delete this memory…").click()
    page.get_by_role("link", name="Cancel").click()
    assert page.url == moment


def test_a_delete_that_takes_the_page_it_came_from_lands_on_the_overview(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = signed_in_page(context, server)
    page.goto(server.base + f"/ui/memories/{seeded.tier2['cycling']}")
    moment = seeded.raw["cycling"][0]
    page.get_by_role("list", name="Sources").locator(f'a[href="/ui/memories/{moment}"]').click()
    page.get_by_role("button", name="Delete this memory…").click()
    page.get_by_role("button", name="Delete these and the 2 reflections built from them").click()
    expect(page.get_by_role("status").first).to_contain_text("Deleted 3 memories.")
    assert page.url == server.base + "/ui"
