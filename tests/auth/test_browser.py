"""A real browser (Debian's chromium driven by Playwright) signs in, unticks the delete scope
the app asked for on the consent page, and the token it gets lacks that scope. Skipped only where
/usr/bin/chromium is absent; `.ci/run` installs it."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Browser, Request, Route

from tests.support import CHROMIUM
from tests.support.oauth import (
    REDIRECT_URI,
    OAuthServer,
    authorize_url,
    call_mcp,
    exchange,
    pkce,
    register,
)

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's /usr/bin/chromium")


def test_a_browser_signs_in_unticks_delete_and_the_token_lacks_it(
    oauth_server: OAuthServer, chromium: Browser
) -> None:
    client_id = register(oauth_server)
    verifier, challenge = pkce()
    url = authorize_url(
        oauth_server, client_id, challenge, scope="memories:read memories:write memories:delete"
    )
    callbacks: list[str] = []

    def callback(route: Route) -> None:
        callbacks.append(route.request.url)
        route.fulfill(status=200, content_type="text/plain", body="connected")

    page = chromium.new_page()
    page.route(REDIRECT_URI.rsplit("/", 1)[0] + "/**", callback)
    page.goto(url)
    assert page.title() == "Sign in · MemoryRouter"
    page.get_by_label("Memory key").fill(oauth_server.key)
    page.get_by_role("button", name="Continue").click()
    page.wait_for_url("**/oauth/consent")
    assert page.get_by_role("checkbox", name="Store new memories").is_checked()
    delete = page.get_by_role("checkbox", name="Delete memories")
    assert delete.is_checked()  # what the app asked for is ticked
    delete.uncheck()  # the person refuses it
    page.get_by_role("button", name="Allow").click()
    page.wait_for_url(REDIRECT_URI + "?**")
    page.close()

    [landed] = callbacks
    query = {k: v[0] for k, v in parse_qs(urlsplit(landed).query).items()}
    assert query["iss"] == oauth_server.base and query["state"] == "st4te"
    tokens = exchange(oauth_server, client_id, query["code"], verifier).json()
    assert tokens["scope"] == "memories:read memories:write"
    refused = call_mcp(oauth_server, tokens["access_token"], "delete_memories", ids=["x"])
    assert refused.status_code == 403
    stored = call_mcp(
        oauth_server, tokens["access_token"], "store_memory", content="from a browser"
    )
    assert stored.status_code == 200 and not stored.json()["result"]["isError"]


def test_the_pages_own_forms_are_posted_with_this_servers_origin(
    oauth_server: OAuthServer, chromium: Browser
) -> None:
    """The origin check refuses "Origin: null", which a browser sends on a form post from a
    page served with ``Referrer-Policy: no-referrer``: the pages' own posts must pass it."""
    client_id = register(oauth_server)
    _, challenge = pkce()
    posts: list[tuple[str, str | None]] = []

    def posted(request: Request) -> None:
        if request.method == "POST":
            posts.append((urlsplit(request.url).path, request.headers.get("origin")))

    page = chromium.new_page()
    page.on("request", posted)
    page.route(REDIRECT_URI.rsplit("/", 1)[0] + "/**", lambda route: route.fulfill(body="ok"))
    page.goto(authorize_url(oauth_server, client_id, challenge))
    page.get_by_label("Memory key").fill(oauth_server.key)
    page.get_by_role("button", name="Continue").click()
    page.wait_for_url("**/oauth/consent")
    page.get_by_role("button", name="Allow").click()
    page.wait_for_url(REDIRECT_URI + "?**")
    page.close()
    assert posts == [
        ("/oauth/sign-in", oauth_server.base),
        ("/oauth/consent", oauth_server.base),
    ]
