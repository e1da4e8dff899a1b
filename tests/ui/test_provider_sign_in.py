"""The explorer's sign-in through the identity provider, in a real browser (Debian's
chromium) against the real provider (npm's oidc-provider), the provider on another site
(``localhost``) than the server (``127.0.0.1``), as in production. The provider's redirect
back is a cross-site navigation, which carries none of the explorer's SameSite=Strict
cookies: the page it lands on goes on to the explorer itself, so the session opens there."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser

from tests.auth.oidc_idp import PASSWORD, Idp, running_idp
from tests.support import free_port
from tests.support.oauth import CLIENT, PEOPLE, OAuthServer, oauth_server_at
from tests.support.ui import DESKTOP, axe_violations, needs_browser, shoot

pytestmark = needs_browser


@contextmanager
def served_cross_site(tmp_path: Path) -> Iterator[tuple[OAuthServer, Idp]]:
    port = free_port()
    issuer = f"http://localhost:{port}"
    with oauth_server_at(
        tmp_path,
        signin="oidc",
        oidc_issuer=issuer,
        oidc_client_id=CLIENT["client_id"],
        oidc_client_secret=CLIENT["client_secret"],
        oidc_name="Example ID",
        oidc_allowed_domains=["example.org"],
    ) as server:
        callback = server.base + "/oauth/oidc/callback"
        clients = [{**CLIENT, "redirect_uris": [callback]}]
        with running_idp(clients, PEOPLE, port=port, issuer=issuer) as idp:
            yield server, idp


def test_a_person_signs_in_to_the_explorer_at_a_provider_on_another_site(
    tmp_path: Path, chromium: Browser
) -> None:
    with served_cross_site(tmp_path) as (server, idp):
        context = chromium.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
        try:
            page = context.new_page()
            page.goto(server.base + "/ui/timeline")
            assert "/ui/sign-in" in page.url
            assert page.get_by_label("Memory key").count() == 0
            assert axe_violations(page) == []
            shoot(page, "sign-in-provider")
            page.get_by_role("link", name="Continue with Example ID").click()
            page.wait_for_url(f"{idp.issuer}/**")
            page.locator('input[name="login"]').fill("ada")
            page.locator('input[name="password"]').fill(PASSWORD)
            page.locator('button[type="submit"]').click()
            page.locator('button[type="submit"]').click()  # the provider's own consent
            page.wait_for_url(server.base + "/ui/timeline")
            assert page.get_by_role("button", name="Sign out").is_visible()
            cookies = {c["name"]: c for c in context.cookies()}
            assert cookies["memoryrouter_ui"]["sameSite"] == "Strict"
            assert "memoryrouter_explorer_login" not in cookies  # spent
            assert not any(c["value"].startswith("mk_") for c in cookies.values())
            page.goto(server.base + "/ui")  # the session holds from page to page
            assert page.get_by_role("button", name="Sign out").is_visible()
        finally:
            context.close()
