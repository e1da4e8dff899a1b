"""The sign-in and consent pages wear the explorer's look: its one stylesheet from this server
(no inline style, no script, a strict Content-Security-Policy), the product's and the server's
name, the scopes in words, Allow as the main button and Deny beside it. In chromium: axe-core
finds nothing serious, nothing scrolls sideways on a phone, and a screenshot of the sign-in
page, the first consent and a step-up consent is written (into build/screenshots, or
MEMORYROUTER_SCREENSHOTS; docs/screenshots holds the ones docs/auth.md shows)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.support import CHROMIUM, CHROMIUM_ARGS
from tests.support.oauth import (
    REDIRECT_URI,
    OAuthServer,
    authorize_url,
    exchange,
    pkce,
    read_form,
    register,
)
from tests.support.ui import DESKTOP, PHONE, axe_violations, dumps, needs_browser, shoot

pytestmark = pytest.mark.anyio
WORDS = ["Read your memories", "Store new memories", "Delete memories"]


async def test_the_pages_use_the_explorers_stylesheet_and_name_the_scopes_in_words(
    oauth_server: OAuthServer,
) -> None:
    client_id = register(oauth_server)
    _, challenge = pkce()
    scope = "memories:read memories:write memories:delete"
    async with httpx2.AsyncClient(timeout=30) as browser:
        started = await browser.get(authorize_url(oauth_server, client_id, challenge, scope=scope))
        sign_in = await browser.get(started.headers["location"])
        posted = await browser.post(
            str(sign_in.url),
            data={**read_form(sign_in.text).fields, "memory_key": oauth_server.key},
        )
        consent = await browser.get(oauth_server.base + posted.headers["location"])
        sheet = await browser.get(oauth_server.base + "/oauth/static/explorer.css")
        explorers = await browser.get(oauth_server.base + "/ui/static/explorer.css")
    for page in (sign_in, consent):
        policy = page.headers["content-security-policy"]
        assert "style-src 'self'" in policy and "unsafe-inline" not in policy
        assert "script-src" not in policy  # default-src 'none': no script at all
        assert "<style" not in page.text and " style=" not in page.text
        assert '<link rel="stylesheet" href="/oauth/static/explorer.css">' in page.text
        assert '<p class="brand">MemoryRouter</p>' in page.text
    assert sheet.status_code == 200 and sheet.headers["content-type"].startswith("text/css")
    assert sheet.content == explorers.content  # one stylesheet, not a copy
    labels = [f">{words} " for words in WORDS]
    assert all(label in consent.text for label in labels)
    assert "<code>memories:" not in consent.text  # scopes in words, not ids in code font
    allow = '<button type="submit" name="decision" value="allow">Allow</button>'
    deny = '<button type="submit" name="decision" value="deny" class="secondary">Deny</button>'
    assert allow + deny in consent.text  # Allow first (Enter allows), Deny the other


# --- in chromium ------------------------------------------------------------------------------


@pytest.fixture
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def look_at(page: Page, name: str) -> None:
    """axe-core finds nothing serious, nothing scrolls sideways, the page is screenshot."""
    found = axe_violations(page)
    assert not found, f"{name}: {dumps(found)}"
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{name} scrolls sideways by {overflow}px"
    assert shoot(page, name).stat().st_size > 5_000


def background(page: Page, name: str) -> str:
    button = page.get_by_role("button", name=name, exact=True)
    return str(button.evaluate("b => getComputedStyle(b).backgroundColor"))


@needs_browser
def test_in_chromium_the_first_and_the_step_up_consent_look_like_the_explorer(
    oauth_server: OAuthServer, chromium: Browser
) -> None:
    registered = httpx2.post(
        oauth_server.base + "/register",
        json={
            "client_name": "Claude",
            "redirect_uris": [REDIRECT_URI],
            "token_endpoint_auth_method": "none",
        },
    )
    client_id = registered.json()["client_id"]
    refused: list[str] = []  # what the Content-Security-Policy blocked
    context = chromium.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    page = context.new_page()
    page.on("console", lambda m: refused.append(m.text) if "Refused" in m.text else None)
    page.route(REDIRECT_URI.rsplit("/", 1)[0] + "/**", lambda route: route.fulfill(body="ok"))
    verifier, challenge = pkce()
    first = "memories:read memories:write memories:reflect"
    page.goto(authorize_url(oauth_server, client_id, challenge, scope=first))
    assert page.title() == "Sign in · MemoryRouter"
    look_at(page, "oauth-sign-in-desktop")
    page.get_by_label("Memory key").fill(oauth_server.key)
    page.get_by_role("button", name="Continue").click()
    page.wait_for_url("**/oauth/consent")
    assert page.title() == "Allow access? · MemoryRouter"
    assert page.get_by_role("checkbox", name="Read your memories").is_checked()
    assert background(page, "Allow") == "rgb(11, 87, 164)"  # the explorer's accent
    assert background(page, "Deny") == "rgb(255, 255, 255)"  # the secondary button
    look_at(page, "oauth-consent-desktop")
    page.set_viewport_size(PHONE)  # type: ignore[arg-type]
    look_at(page, "oauth-consent-phone")
    page.set_viewport_size(DESKTOP)  # type: ignore[arg-type]
    page.get_by_role("button", name="Allow").click()
    page.wait_for_url(REDIRECT_URI + "?**")
    code = dict(p.split("=", 1) for p in page.url.split("?", 1)[1].split("&"))["code"]
    exchanged = exchange(oauth_server, client_id, code, verifier)
    assert exchanged.status_code == 200, exchanged.text

    _, challenge = pkce()
    wider = first + " memories:delete"  # what the MCP SDK asks for after a 403
    page.goto(authorize_url(oauth_server, client_id, challenge, scope=wider))
    page.wait_for_url("**/oauth/consent")  # signed in already: consent only
    assert page.title() == "Allow more access? · MemoryRouter"
    assert page.get_by_role("status").inner_text().endswith("now asks to delete memories.")
    delete = page.get_by_role("checkbox", name="Delete memories")
    assert delete.is_checked()
    assert "new request" in str(page.locator("li.new label").inner_text())
    look_at(page, "oauth-consent-step-up-desktop")
    context.close()
    assert refused == []
