"""Tidy makes a read-write key as well as a read-only one: chosen in words, shown once after
the redirect, and able to do what it says."""

from __future__ import annotations

from playwright.sync_api import BrowserContext, expect

from tests.support.oauth import OAuthServer
from tests.support.ui import api, csrf_of, needs_browser, sign_in, signed_in

pytestmark = needs_browser


def test_a_read_write_key_is_made_shown_once_and_can_store(
    server: OAuthServer, context: BrowserContext
) -> None:
    page = context.new_page()
    sign_in(page, server, server.key)
    page.goto(server.base + "/ui/tidy")
    page.get_by_label("Name of the new key").fill("laptop")
    page.get_by_label("Read-write: also stores").check()
    page.get_by_role("button", name="Make the key").click()
    card = page.locator(".minted")
    expect(card).to_contain_text("New read-write key “laptop”")
    expect(card).to_contain_text("keep it like a password")
    minted = page.locator("code.secret").inner_text()
    assert api(server, "GET", "/v1/keys/current", minted) == {
        "vault": server.vault_of(server.key),
        "read_only": False,
        "mode": "full",
    }
    stored = api(server, "POST", "/v1/memory/ingest", minted, messages=[{"content": "hello"}])
    assert len(stored["ids"]) == 1
    row = page.locator("table.keys tr", has_text="laptop")
    expect(row).to_contain_text("read-write")
    page.reload()
    assert page.locator("code.secret").count() == 0  # shown once


def test_a_key_made_without_a_choice_is_read_only_and_an_unknown_access_is_refused(
    server: OAuthServer,
) -> None:
    with signed_in(server, server.key) as browser:
        token = csrf_of(browser)
        plain = browser.post("/ui/keys", data={"csrf": token, "name": "old form"})
        odd = browser.post("/ui/keys", data={"csrf": token, "name": "odd", "access": "admin"})
    assert plain.status_code == 303 and odd.status_code == 400
    keys = {k["name"]: k["read_only"] for k in api(server, "GET", "/v1/keys", server.key)["keys"]}
    assert keys == {"default": False, "old form": True}
