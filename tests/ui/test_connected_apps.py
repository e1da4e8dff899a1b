"""Tidy lists the apps signed in to the vault by OAuth (name, what they may do, when they
connected and were last active) and disconnects one without revoking the key: its tokens
stop at once, the key and the other apps keep working. Only the signed-in vault's apps are
ever shown or touched."""

from __future__ import annotations

import re

from playwright.sync_api import BrowserContext, Page, expect

from tests.support.oauth import OAuthServer, call_mcp, refresh
from tests.support.ui import Seeded, api, connect_app, needs_browser, sign_in

pytestmark = needs_browser


def tidy(context: BrowserContext, server: OAuthServer, key: str) -> Page:
    page = context.new_page()
    sign_in(page, server, key)
    page.goto(server.base + "/ui/tidy")
    return page


def test_an_app_is_listed_and_disconnected_without_revoking_the_key(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    client_id, tokens = connect_app(server, server.key)
    other_key = server.new_key()
    _, other_tokens = connect_app(server, other_key)
    assert call_mcp(server, tokens["access_token"], "memory_status").status_code == 200
    page = tidy(context, server, server.key)
    apps = page.locator("table.apps tbody tr")
    expect(apps).to_have_count(1)  # the other vault's app is not this vault's
    expect(apps.first).to_contain_text("Raw test client")
    expect(apps.first).to_contain_text("returns to 127.0.0.1")
    expect(apps.first).to_contain_text("Read your memories, Store new memories")
    assert re.search(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", apps.first.inner_text())

    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Disconnect Raw test client").click()
    expect(page.get_by_role("status").first).to_contain_text("The app is disconnected")
    expect(page.locator("table.apps")).to_have_count(0)
    expect(page.locator("#apps-h + p.empty")).to_contain_text("No app is connected")
    # its tokens stop at once; the key, and the other vault's app, keep working
    assert call_mcp(server, tokens["access_token"], "memory_status").status_code == 401
    assert refresh(server, client_id, tokens["refresh_token"]).status_code == 400
    assert api(server, "GET", "/v1/memory/stats", server.key)["total_memories"] > 0
    assert call_mcp(server, other_tokens["access_token"], "memory_status").status_code == 200


def test_another_vaults_app_cannot_be_disconnected_from_here(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    other_key = server.new_key()
    other_client, other_tokens = connect_app(server, other_key)
    page = tidy(context, server, server.key)
    csrf = page.locator('form.signout input[name="csrf"]').get_attribute("value") or ""
    answer = page.request.post(
        server.base + "/ui/apps/disconnect", form={"csrf": csrf, "client": other_client}
    )
    assert answer.status == 404
    assert call_mcp(server, other_tokens["access_token"], "memory_status").status_code == 200


def test_a_read_only_key_sees_no_apps_and_cannot_disconnect_one(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    client_id, tokens = connect_app(server, server.key)
    reader = api(server, "POST", "/v1/keys", server.key, name="reader", read_only=True)["key"]
    page = tidy(context, server, reader)
    assert page.locator("table.apps").count() == 0
    assert page.get_by_role("button", name=re.compile("Disconnect|Import")).count() == 0
    csrf = page.locator('form.signout input[name="csrf"]').get_attribute("value") or ""
    answer = page.request.post(
        server.base + "/ui/apps/disconnect", form={"csrf": csrf, "client": client_id}
    )
    assert answer.status == 403
    assert call_mcp(server, tokens["access_token"], "memory_status").status_code == 200
