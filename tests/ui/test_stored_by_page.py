"""A memory's page says where it came from: the surface it came through, the client it
named and the key (its name and public id); a memory added in the explorer is the
explorer's. In a real browser, as the memory page's other checks are."""

from __future__ import annotations

from playwright.sync_api import BrowserContext, expect

from tests.support.oauth import OAuthServer
from tests.support.ui import api, needs_browser, sign_in

pytestmark = needs_browser


def test_a_memory_page_says_what_stored_it(server: OAuthServer, context: BrowserContext) -> None:
    key_id = api(server, "GET", "/v1/keys", server.key)["keys"][0]["id"]
    page = context.new_page()
    sign_in(page, server, server.key)
    page.get_by_role("link", name="Add", exact=True).click()
    page.get_by_label("What to remember").fill("The spare key is under the blue flowerpot.")
    page.get_by_role("button", name="Store the memory").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Tier 1 moment")
    expect(page.locator(".stored-by")).to_contain_text("Stored through this explorer")
    expect(page.locator(".stored-by code")).to_have_text(key_id)

    stored = api(
        server,
        "POST",
        "/v1/memory/ingest",
        server.key,
        messages=[{"content": "Sent by a script over REST."}],
    )
    page.goto(server.base + f"/ui/memories/{stored['ids'][0]}")
    expect(page.locator(".stored-by")).to_contain_text("Stored through the REST API")
