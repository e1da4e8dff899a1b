"""Sign-in with a real, certified OpenID Provider (npm's oidc-provider on Node 22, on
loopback): a connector's whole flow where the person signs in at the provider, never sees a
memory key, and gets a vault of their own; two people get two vaults that see nothing of
each other; the same person signing in again (another browser, another day) gets the same
vault; a person outside the operator's allow-list is refused with a page that says so."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2

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


@contextmanager
def served(tmp_path: Path) -> Iterator[tuple[OAuthServer, Idp]]:
    port = free_port()
    with oauth_server_at(
        tmp_path,
        signin="oidc",
        oidc_issuer=f"http://127.0.0.1:{port}",
        oidc_client_id=CLIENT["client_id"],
        oidc_client_secret=CLIENT["client_secret"],
        oidc_name="Example ID",
        oidc_allowed_domains=["example.org"],
    ) as server:
        callback = server.base + "/oauth/oidc/callback"
        with running_idp([{**CLIENT, "redirect_uris": [callback]}], PEOPLE, port=port) as idp:
            yield server, idp


def connect(server: OAuthServer, idp: Idp, login: str) -> httpx2.Response | dict[str, Any]:
    """A connector's flow in a fresh browser, signing in at the provider as ``login``: the
    token response, or the page that refused."""
    with httpx2.Client(timeout=30) as browser:
        client_id = register(server)
        verifier, challenge = pkce()
        first = browser.get(authorize_url(server, client_id, challenge))
        page = browser.get(first.headers["location"])
        assert "Continue with Example ID" in page.text and "memory_key" not in page.text
        started = browser.post(server.base + "/oauth/oidc/start", data=read_form(page.text).fields)
        assert started.status_code == 303 and idp.owns(started.headers["location"])
        back = idp.sign_in(browser, started.headers["location"], login)
        return consented(server, browser, browser.get(back), client_id, verifier)


def remembered(server: OAuthServer, token: str) -> str:
    answer = call_mcp(server, token, "search_memories", query="teal")
    assert answer.status_code == 200, answer.text
    return answer.text


def test_people_sign_in_at_their_provider_and_each_gets_one_vault(tmp_path: Path) -> None:
    with served(tmp_path) as (server, idp):
        vaults_before = server.service.vault_count()
        ada = connect(server, idp, "ada")
        assert isinstance(ada, dict)
        stored = call_mcp(
            server, ada["access_token"], "store_memory", content="Ada's favourite colour is teal."
        )
        assert stored.status_code == 200, stored.text
        assert stored.json()["result"]["isError"] is False, stored.text
        bob = connect(server, idp, "bob")
        assert isinstance(bob, dict)
        assert server.service.vault_count() == vaults_before + 2  # one each
        assert "teal" not in remembered(server, bob["access_token"])  # bob sees nothing of ada's
        again = connect(server, idp, "ada")  # another browser, the same person
        assert isinstance(again, dict)
        assert server.service.vault_count() == vaults_before + 2  # no third vault
        assert "teal" in remembered(server, again["access_token"])


def test_a_person_outside_the_allow_list_is_refused_and_gets_no_vault(tmp_path: Path) -> None:
    with served(tmp_path) as (server, idp):
        vaults_before = server.service.vault_count()
        refused = connect(server, idp, "eve")
        assert isinstance(refused, httpx2.Response)
        assert refused.status_code == 403
        assert "eve@evil.example may not sign in" in refused.text
        assert server.service.vault_count() == vaults_before


def explore(server: OAuthServer, idp: Idp, login: str, browser: httpx2.Client) -> httpx2.Response:
    """The explorer's sign-in in ``browser``, at the provider as ``login``: the answer to the
    provider's redirect back (the page going on to /ui/search, or a refusal)."""
    form = browser.get(server.base + "/ui/sign-in?next=/ui/search")
    assert form.status_code == 200
    assert "Continue with Example ID" in form.text and 'name="key"' not in form.text
    started = browser.get(server.base + "/ui/sign-in/provider?next=/ui/search")
    assert started.status_code == 303 and idp.owns(started.headers["location"])
    back = idp.sign_in(browser, started.headers["location"], login)
    assert back.startswith(server.base + "/oauth/oidc/callback?")
    return browser.get(back)


def vault_shown(browser: httpx2.Client, server: OAuthServer) -> str:
    overview = browser.get(server.base + "/ui")
    assert overview.status_code == 200, overview.text
    return overview.text.split("Vault <code>", 1)[1].split("</code>", 1)[0]


def test_a_person_opens_the_explorer_by_signing_in_at_their_provider(tmp_path: Path) -> None:
    """The same provider, the same callback and the same vault as their connectors: no key
    is typed or shown; the explorer's session is on the person's own vault."""
    with served(tmp_path) as (server, idp):
        ada = connect(server, idp, "ada")
        assert isinstance(ada, dict)
        stored = call_mcp(server, ada["access_token"], "store_memory", content="Teal is Ada's.")
        assert stored.status_code == 200, stored.text
        with httpx2.Client(timeout=30) as browser:
            landed = explore(server, idp, "ada", browser)
            assert landed.status_code == 200, landed.text
            assert 'http-equiv="refresh" content="0;url=/ui/search"' in landed.text
            assert "mk_" not in landed.text and "mk_" not in str(browser.cookies)
            assert landed.headers["content-security-policy"].startswith("default-src 'none'")
            found = browser.get(server.base + "/ui/search?q=teal")
            assert found.status_code == 200 and "Teal is Ada" in found.text
            ada_vault = vault_shown(browser, server)
            refused = browser.post(server.base + "/ui/sign-in", data={"key": server.key})
            assert refused.status_code == 403  # no memory key is taken here
        with httpx2.Client(timeout=30) as other:  # bob: his own vault, none of ada's
            assert explore(server, idp, "bob", other).status_code == 200
            assert vault_shown(other, server) != ada_vault
            assert "Teal is Ada" not in other.get(server.base + "/ui/search?q=teal").text


def test_the_explorers_provider_sign_in_refuses_what_the_connectors_refuse(
    tmp_path: Path,
) -> None:
    with served(tmp_path) as (server, idp):
        vaults_before = server.service.vault_count()
        with httpx2.Client(timeout=30) as browser:
            refused = explore(server, idp, "eve", browser)
            assert refused.status_code == 403
            assert "eve@evil.example may not sign in" in refused.text
            assert "Sign in again from the explorer" in refused.text
            assert browser.get(server.base + "/ui").status_code == 303  # no session
        assert server.service.vault_count() == vaults_before
        # a callback opened in another browser than the one that started the sign-in
        with httpx2.Client(timeout=30) as starter, httpx2.Client(timeout=30) as thief:
            started = starter.get(server.base + "/ui/sign-in/provider")
            back = idp.sign_in(starter, started.headers["location"], "ada")
            stolen = thief.get(back)
            assert stolen.status_code == 400 and "another browser" in stolen.text
            assert thief.get(server.base + "/ui").status_code == 303
