"""Several identity providers at once (MEMORYROUTER_OIDC_* and MEMORYROUTER_OIDC_PROVIDERS),
each a real oidc-provider on Node 22: the sign-in pages offer one button each; a person is
their provider's (iss, sub), so the same address at two providers is two people with two
vaults; each provider admits by its own lists; a callback is routed by the provider its state
names, and a state naming none is refused."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.config import OidcProviderSettings, Settings
from mcp_memoryrouter.errors import ConfigError
from tests.auth.oidc_idp import Idp, running_idp
from tests.support import free_port
from tests.support.oauth import (
    CLIENT,
    PEOPLE,
    OAuthServer,
    authorize_url,
    call_mcp,
    consented,
    oauth_server_at,
    pkce,
    read_form,
    register,
)

COMPANY_CLIENT = {"client_id": "memoryrouter-co", "client_secret": "another-long-secret-for-tests"}
COMPANY_PEOPLE = {
    "ada": {"sub": "co-ada", "email": "ada@example.org", "email_verified": True},
    "mallory": {"sub": "co-mallory", "email": "mallory@company.example", "email_verified": True},
}
_BUTTON = re.compile(
    r'name="provider" value="([^"]+)"><button type="submit">Continue with ([^<]+)</button>'
)


@contextmanager
def two_providers(tmp_path: Path) -> Iterator[tuple[OAuthServer, dict[str, Idp]]]:
    example, company = free_port(), free_port()
    with (
        oauth_server_at(
            tmp_path,
            signin="oidc",
            oidc_issuer=f"http://127.0.0.1:{example}",
            oidc_client_id=CLIENT["client_id"],
            oidc_client_secret=CLIENT["client_secret"],
            oidc_name="Example ID",
            oidc_allowed_domains=["example.org"],
            oidc_providers=[
                OidcProviderSettings(
                    issuer=f"http://127.0.0.1:{company}",
                    client_id=COMPANY_CLIENT["client_id"],
                    client_secret=COMPANY_CLIENT["client_secret"],
                    name="Company ID",
                    allowed_emails=["ada@example.org"],
                )
            ],
        ) as server,
        ExitStack() as stack,
    ):
        callback = server.base + "/oauth/oidc/callback"
        idps = {
            "Example ID": stack.enter_context(
                running_idp([{**CLIENT, "redirect_uris": [callback]}], PEOPLE, port=example)
            ),
            "Company ID": stack.enter_context(
                running_idp(
                    [{**COMPANY_CLIENT, "redirect_uris": [callback]}], COMPANY_PEOPLE, port=company
                )
            ),
        }
        yield server, idps


def connect_with(
    server: OAuthServer, idps: dict[str, Idp], provider: str, login: str
) -> httpx2.Response | dict[str, Any]:
    """A connector's flow in a fresh browser through ``provider``'s button: the token
    response, or the page that refused."""
    with httpx2.Client(timeout=30) as browser:
        client_id = register(server)
        verifier, challenge = pkce()
        first = browser.get(authorize_url(server, client_id, challenge))
        page = browser.get(first.headers["location"])
        buttons = {name: key for key, name in _BUTTON.findall(page.text)}
        assert set(buttons) == {"Example ID", "Company ID"}, page.text
        fields = {**read_form(page.text).fields, "provider": buttons[provider]}
        started = browser.post(server.base + "/oauth/oidc/start", data=fields)
        assert started.status_code == 303, started.text
        idp = idps[provider]
        assert idp.owns(started.headers["location"])
        answer = browser.get(idp.sign_in(browser, started.headers["location"], login))
        return consented(server, browser, answer, client_id, verifier)


def vault_of(server: OAuthServer, tokens: dict[str, Any]) -> str:
    """The vault the access token is for (its ``sub``), once the token is seen to work."""
    answer = call_mcp(server, tokens["access_token"], "search_memories", query="anything")
    assert answer.status_code == 200, answer.text
    payload = tokens["access_token"].split(".")[1]
    return str(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sub"])


def test_two_providers_sign_people_in_each_by_its_own_rules(tmp_path: Path) -> None:
    with two_providers(tmp_path) as (server, idps):
        before = server.service.vault_count()
        at_example = connect_with(server, idps, "Example ID", "ada")
        at_company = connect_with(server, idps, "Company ID", "ada")
        assert isinstance(at_example, dict) and isinstance(at_company, dict)
        # the same address at two providers: two (iss, sub), two people, two vaults
        assert vault_of(server, at_example) != vault_of(server, at_company)
        again = connect_with(server, idps, "Company ID", "ada")
        assert isinstance(again, dict)
        assert vault_of(server, again) == vault_of(server, at_company)
        assert server.service.vault_count() == before + 2
        # the company's list admits ada alone; mallory is refused there, with no vault
        refused = connect_with(server, idps, "Company ID", "mallory")
        assert isinstance(refused, httpx2.Response) and refused.status_code == 403
        assert "mallory@company.example may not sign in" in refused.text
        assert server.service.vault_count() == before + 2


def test_a_callback_is_routed_by_the_provider_its_state_names(tmp_path: Path) -> None:
    with two_providers(tmp_path) as (server, _):
        stray = httpx2.get(server.base + "/oauth/oidc/callback?state=nobody.x&code=c")
        assert stray.status_code == 400
        assert "did not come from an identity provider" in stray.text


def test_the_explorer_offers_every_provider(tmp_path: Path) -> None:
    with two_providers(tmp_path) as (server, idps), httpx2.Client(timeout=30) as browser:
        form = browser.get(server.base + "/ui/sign-in")
        assert "Continue with Example ID" in form.text and "Continue with Company ID" in form.text
        link = re.search(r'href="(/ui/sign-in/provider\?[^"]+)">Continue with Company', form.text)
        assert link is not None
        started = browser.get(server.base + link.group(1).replace("&amp;", "&"))
        assert started.status_code == 303 and idps["Company ID"].owns(started.headers["location"])
        back = idps["Company ID"].sign_in(browser, started.headers["location"], "ada")
        assert browser.get(back).status_code == 200
        overview = browser.get(server.base + "/ui")
        assert overview.status_code == 200 and "Sign out" in overview.text


def test_provider_settings_that_cannot_work_stop_the_server(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="MEMORYROUTER_OIDC_PROVIDERS"):
        create_server(Settings(data_dir=tmp_path / "a", embeddings="none", signin="oidc"))
    with pytest.raises(ConfigError, match="MEMORYROUTER_OIDC_CLIENT_SECRET"):
        create_server(
            Settings(
                data_dir=tmp_path / "b",
                embeddings="none",
                signin="oidc",
                oidc_issuer="https://id.example",
                oidc_client_id="c",
            )
        )
    twice = OidcProviderSettings(issuer="https://id.example", client_id="c", client_secret="s")
    with pytest.raises(ConfigError, match="named twice"):
        create_server(
            Settings(
                data_dir=tmp_path / "c",
                embeddings="none",
                signin="oidc",
                oidc_providers=[twice, twice],
            )
        )
