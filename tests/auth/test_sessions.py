"""Sign-in sessions and consent: one sign-in per browser, the consent page's words, pending
requests bound to the browser that started them, and a revoked memory key ending everything
made with it."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest

from mcp_memoryrouter.auth.server.browser import Cookies
from tests.support.oauth import (
    REDIRECT_URI,
    Browser,
    OAuthServer,
    authorize_url,
    call_mcp,
    exchange,
    grant_tokens,
    oauth_server_at,
    pkce,
    read_form,
    refresh,
    register,
)

pytestmark = pytest.mark.anyio
FIRST_CONNECTION = ["memories:read", "memories:write", "memories:reflect"]


@pytest.fixture
def named_server(tmp_path: Path) -> Iterator[OAuthServer]:
    with oauth_server_at(tmp_path, server_name="Ada's memory") as server:
        yield server


def _auth_path(server: OAuthServer) -> str:
    """The authorization server's SQLite file."""
    oauth = server.server.oauth
    assert oauth is not None
    row = oauth.store._one("PRAGMA database_list")
    assert row is not None
    return str(row["file"])


async def signed_in(
    server: OAuthServer, browser: Browser, *, without: str = "", **extra: str
) -> httpx2.Response:
    """Start an authorization in ``browser`` (its URL ``without`` one parameter, if named)
    and sign in: the consent page."""
    client_id = register(server)
    _, challenge = pkce()
    url = httpx2.URL(authorize_url(server, client_id, challenge, **extra))
    started = await browser.get(str(url.copy_remove_param(without) if without else url))
    page = await browser.get(started.headers["location"])
    posted = await browser.post(
        str(page.url), {**read_form(page.text).fields, "memory_key": browser.key}
    )
    assert posted.status_code == 303, posted.text
    return await browser.get(str(posted.url.join(posted.headers["location"])))


# scopes at first connection -----------------------------------------------------------------


async def test_an_authorization_request_naming_no_scope_is_offered_ordinary_use(
    oauth_server: OAuthServer,
) -> None:
    browser = Browser(oauth_server.key)
    try:
        consent = await signed_in(oauth_server, browser, without="scope")
    finally:
        await browser.aclose()
    form = read_form(consent.text)
    assert form.scopes == FIRST_CONNECTION and form.ticked == FIRST_CONNECTION


# sessions ---------------------------------------------------------------------------------


async def test_a_browser_that_signed_in_is_asked_only_to_consent_the_next_time(
    oauth_server: OAuthServer,
) -> None:
    browser = Browser(oauth_server.key)
    try:
        _, first = await grant_tokens(oauth_server, browser=browser)
        _, second = await grant_tokens(oauth_server, browser=browser, scope="memories:delete")
    finally:
        await browser.aclose()
    assert browser.sign_ins == 1
    assert second["scope"] == "memories:delete"
    assert call_mcp(oauth_server, first["access_token"], "memory_status").status_code == 200
    deleted = call_mcp(oauth_server, second["access_token"], "delete_memories", ids=["x"])
    assert deleted.status_code == 200


@pytest.mark.own_server  # reads every session row
async def test_the_session_cookie_is_httponly_lax_for_30_days_and_its_secret_stored_hashed(
    oauth_server: OAuthServer,
) -> None:
    browser = Browser(oauth_server.key)
    try:
        client_id = register(oauth_server)
        _, challenge = pkce()
        started = await browser.get(authorize_url(oauth_server, client_id, challenge))
        page = await browser.get(started.headers["location"])
        posted = await browser.post(
            str(page.url), {**read_form(page.text).fields, "memory_key": oauth_server.key}
        )
        secret = browser.http.cookies["memoryrouter_session"]
    finally:
        await browser.aclose()
    [header] = [h for h in posted.headers.get_list("set-cookie") if "memoryrouter_session=" in h]
    attributes = {part.strip().split("=")[0].lower() for part in header.split(";")}
    assert {"httponly", "max-age", "path"} <= attributes
    assert "max-age=2592000" in header.lower() and "samesite=lax" in header.lower()
    assert "secure" not in attributes  # a loopback http issuer: a development server
    with sqlite3.connect(_auth_path(oauth_server)) as db:
        rows = db.execute("SELECT * FROM oauth_sessions").fetchall()
    [row] = rows
    assert hashlib.sha256(secret.encode()).hexdigest() in row
    assert not any(secret in str(value) for value in row)
    assert not any(oauth_server.key in str(value) for value in row)  # the key is sealed


def test_session_cookies_are_secure_unless_the_issuer_is_loopback_http() -> None:
    assert not Cookies.for_issuer("http://127.0.0.1:8787").session_secure
    assert not Cookies.for_issuer("http://localhost:8787").session_secure
    assert Cookies.for_issuer("https://memory.example").session_secure
    assert Cookies.for_issuer("http://10.0.0.5:8787").session_secure


async def test_another_memory_key_can_be_used_from_the_consent_page(
    oauth_server: OAuthServer,
) -> None:
    other = oauth_server.new_key()
    browser = Browser(oauth_server.key)
    try:
        consent = await signed_in(oauth_server, browser)
        switched = await browser.post(
            str(consent.url), {**read_form(consent.text).fields, "decision": "switch"}
        )
        again = await browser.get(str(switched.url.join(switched.headers["location"])))
        assert "memory_key" in read_form(again.text).inputs
        posted = await browser.post(
            str(again.url), {**read_form(again.text).fields, "memory_key": other}
        )
        consent = await browser.get(str(posted.url.join(posted.headers["location"])))
    finally:
        await browser.aclose()
    assert oauth_server.vault_of(other) in consent.text
    assert oauth_server.vault_of(oauth_server.key) not in consent.text


# the pages' words -----------------------------------------------------------------------------


async def test_the_consent_page_names_the_server_the_self_declared_client_and_its_return_host(
    named_server: OAuthServer,
) -> None:
    browser = Browser(named_server.key)
    try:
        consent = await signed_in(
            named_server, browser, scope="memories:read memories:write memories:delete"
        )
    finally:
        await browser.aclose()
    assert "Ada&#x27;s memory" in consent.text
    named = "An app calling itself <strong>&ldquo;<bdi>Raw test client</bdi>&rdquo;</strong>"
    assert named in consent.text
    assert f"<strong><bdi>{urlsplit(REDIRECT_URI).netloc}</bdi></strong>" in consent.text
    form = read_form(consent.text)
    assert form.scopes == ["memories:read", "memories:write", "memories:delete"]
    assert form.ticked == form.scopes  # what the app asked for, the person unticks


async def test_the_sign_in_page_names_the_server_and_says_where_a_memory_key_comes_from(
    named_server: OAuthServer,
) -> None:
    client_id = register(named_server)
    _, challenge = pkce()
    async with httpx2.AsyncClient() as browser:
        started = await browser.get(authorize_url(named_server, client_id, challenge))
        page = await browser.get(started.headers["location"])
    assert "Ada&#x27;s memory" in page.text
    assert "mcp-memoryrouter keys create" in page.text and "memory_key" in page.text


def test_an_unknown_client_or_a_bad_redirect_uri_gets_an_html_page_not_json(
    oauth_server: OAuthServer,
) -> None:
    client_id = register(oauth_server)
    _, challenge = pkce()
    for url in [
        authorize_url(oauth_server, "no-such-client", challenge),
        authorize_url(oauth_server, client_id, challenge, redirect_uri="https://evil.example/cb"),
    ]:
        response = httpx2.get(url)
        assert response.status_code == 400 and "location" not in response.headers
        assert response.headers["content-type"].startswith("text/html")
        assert "<h1>This connection link is not valid</h1>" in response.text
        assert "Go back to the app" in response.text


# Right-to-left override, embeddings, isolates and marks, and other control characters
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
HIDDEN = BIDI + "\x00\x07\x1b\x7f\x85\u2028\u2029\u200b\ufeff"


def only_visible(text: str) -> bool:
    return not any(c in text for c in HIDDEN)


async def test_a_client_name_cannot_reorder_or_hide_the_pages_words(
    oauth_server: OAuthServer,
) -> None:
    """ "Evil \u202e(ai.edualc)" would read "Evil (claude.ia)..." with the page's own words
    after it reversed: each hidden character is shown as <U+...>, the name isolated."""
    name = "Evil \u202e(ia.edualc) " + HIDDEN
    registered = httpx2.post(
        oauth_server.base + "/register",
        json={
            "client_name": name,
            "redirect_uris": [REDIRECT_URI],
            "token_endpoint_auth_method": "none",
        },
    )
    assert registered.status_code == 201
    browser = Browser(oauth_server.key)
    try:
        client_id = registered.json()["client_id"]
        _, challenge = pkce()
        started = await browser.get(authorize_url(oauth_server, client_id, challenge))
        sign_in = await browser.get(started.headers["location"])
        posted = await browser.post(
            str(sign_in.url), {**read_form(sign_in.text).fields, "memory_key": browser.key}
        )
        consent = await browser.get(oauth_server.base + posted.headers["location"])
    finally:
        await browser.aclose()
    for page in (sign_in, consent):
        assert only_visible(page.text)
        assert "<bdi>Evil &lt;U+202E&gt;(ia.edualc) &lt;U+202A&gt;" in page.text
        assert "&lt;U+061C&gt;&lt;U+0000&gt;&lt;U+0007&gt;" in page.text


def test_a_client_id_in_a_bad_link_cannot_reorder_or_hide_the_pages_words(
    oauth_server: OAuthServer,
) -> None:
    _, challenge = pkce()
    response = httpx2.get(authorize_url(oauth_server, "app\u202e" + HIDDEN, challenge))
    assert response.status_code == 400
    assert only_visible(response.text) and "app&lt;U+202E&gt;" in response.text


# consent belongs to the browser that signed in --------------------------------------------


@pytest.mark.own_server  # reads every pending request
async def test_a_pending_request_known_to_another_browser_gives_it_nothing_usable(
    oauth_server: OAuthServer,
) -> None:
    victim = Browser(oauth_server.key)
    client_id = register(oauth_server)
    verifier, challenge = pkce()
    started = await victim.get(authorize_url(oauth_server, client_id, challenge))
    page = await victim.get(started.headers["location"])
    posted = await victim.post(
        str(page.url), {**read_form(page.text).fields, "memory_key": oauth_server.key}
    )
    consent_url = str(posted.url.join(posted.headers["location"]))
    with sqlite3.connect(_auth_path(oauth_server)) as db:
        [(request_id,)] = db.execute("SELECT id FROM oauth_requests").fetchall()
    victims_form = read_form((await victim.http.get(consent_url)).text)
    async with httpx2.AsyncClient() as attacker:
        attacker.cookies.set("memoryrouter_flow", request_id, path="/oauth")
        looks = [url for url in victim.visited if "/authorize" not in url]
        looks += [
            f"{oauth_server.base}/oauth/consent?request={request_id}",
            f"{oauth_server.base}/oauth/sign-in?request={request_id}",
        ]
        for url in looks:
            seen = await attacker.get(url, follow_redirects=True)
            assert 'name="csrf"' not in seen.text and "memoryrouter_flow" not in str(
                seen.headers.get_list("set-cookie")
            ), url
        answer = {
            **victims_form.fields,  # even the victim's own form token
            "request": request_id,
            "scope": [*FIRST_CONNECTION, "memories:delete"],
            "decision": "allow",
        }
        stolen = await attacker.post(f"{oauth_server.base}/oauth/consent", data=answer)
        assert stolen.status_code == 403 and "location" not in stolen.headers
    done = await victim.post(
        consent_url, {**victims_form.fields, "scope": ["memories:read"], "decision": "allow"}
    )
    await victim.aclose()
    code = parse_qs(urlsplit(done.headers["location"]).query)["code"][0]
    tokens = exchange(oauth_server, client_id, code, verifier).json()
    assert tokens["scope"] == "memories:read"


@pytest.mark.own_server  # reads every pending request
async def test_no_url_a_browser_visits_names_its_pending_request(
    oauth_server: OAuthServer,
) -> None:
    """Access logs print URLs: none of them may carry what identifies a pending request."""
    browser = Browser(oauth_server.key)
    client_id = register(oauth_server)
    _, challenge = pkce()
    started = await browser.get(authorize_url(oauth_server, client_id, challenge))
    flow = browser.http.cookies["memoryrouter_flow"]
    with sqlite3.connect(_auth_path(oauth_server)) as db:
        [(request_id,)] = db.execute("SELECT id FROM oauth_requests").fetchall()
    page = await browser.get(started.headers["location"])
    await browser.post(
        str(page.url), {**read_form(page.text).fields, "memory_key": oauth_server.key}
    )
    await browser.aclose()
    assert len(browser.visited) == 3
    for url in [*browser.visited, started.headers["location"]]:
        assert flow not in url and request_id not in url and "request=" not in url


async def test_a_pending_request_is_single_use_and_expires(oauth_server: OAuthServer) -> None:
    browser = Browser(oauth_server.key)
    try:
        consent = await signed_in(oauth_server, browser)
        answer = {**read_form(consent.text).fields, "scope": "memories:read", "decision": "allow"}
        assert (await browser.post(str(consent.url), answer)).status_code == 303
        assert (await browser.post(str(consent.url), answer)).status_code == 403
        client_id = register(oauth_server)
        _, challenge = pkce()
        started = await browser.get(authorize_url(oauth_server, client_id, challenge))
        oauth_server.clock.advance(601)
        late = await browser.get(started.headers["location"])
    finally:
        await browser.aclose()
    assert late.status_code == 400 and "expired" in late.text


async def test_a_token_refresh_naming_the_resource_is_accepted(oauth_server: OAuthServer) -> None:
    client_id, tokens = await grant_tokens(oauth_server)
    response = httpx2.post(
        oauth_server.base + "/token",
        data={
            "grant_type": "refresh_token",
            "client_id": client_id,
            "refresh_token": tokens["refresh_token"],
            "resource": oauth_server.mcp_url,
        },
    )
    assert response.status_code == 200, response.text


# revoking the memory key --------------------------------------------------------------------


def forget_key_in_the_vault(server: OAuthServer, key: str) -> None:
    """The vault no longer knows the key: what revoking it leaves behind."""
    vault_db = Path(_auth_path(server)).parent / "vault.sqlite3"  # both in the data directory
    with sqlite3.connect(vault_db) as db:
        db.execute("DELETE FROM keys WHERE hash = ?", (hashlib.sha256(key.encode()).hexdigest(),))


async def assert_everything_made_with_the_key_ended(
    server: OAuthServer, browser: Browser, client_id: str, tokens: dict[str, str]
) -> None:
    refused = call_mcp(server, tokens["access_token"], "memory_status")
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    renewed = refresh(server, client_id, tokens["refresh_token"])
    assert renewed.status_code == 400 and renewed.json()["error"] == "invalid_grant"
    # the browser session bound to the key is refused: the key is asked for again
    browser.key = server.key
    signed_before = browser.sign_ins
    _, fresh = await grant_tokens(server, browser=browser)
    assert browser.sign_ins == signed_before + 1
    assert call_mcp(server, fresh["access_token"], "memory_status").status_code == 200


async def test_a_memory_key_the_vault_no_longer_knows_ends_its_grants_and_sessions(
    oauth_server: OAuthServer,
) -> None:
    doomed = httpx2.post(
        oauth_server.base + "/v1/keys",
        json={"name": "connector"},
        headers={"Authorization": f"Bearer {oauth_server.key}"},
    ).json()["key"]
    browser = Browser(doomed)
    try:
        client_id, tokens = await grant_tokens(oauth_server, browser=browser)
        assert call_mcp(oauth_server, tokens["access_token"], "memory_status").status_code == 200
        forget_key_in_the_vault(oauth_server, doomed)
        await assert_everything_made_with_the_key_ended(oauth_server, browser, client_id, tokens)
    finally:
        await browser.aclose()


async def test_revoking_a_memory_key_ends_its_grants_and_sessions_at_once(
    oauth_server: OAuthServer,
) -> None:
    minted = httpx2.post(
        oauth_server.base + "/v1/keys",
        json={"name": "connector"},
        headers={"Authorization": f"Bearer {oauth_server.key}"},
    ).json()
    if "id" not in minted:
        pytest.skip("keys have no ids yet: DELETE /v1/keys/{id} is not there")
    browser = Browser(minted["key"])
    try:
        client_id, tokens = await grant_tokens(oauth_server, browser=browser)
        assert call_mcp(oauth_server, tokens["access_token"], "memory_status").status_code == 200
        revoked = httpx2.delete(
            f"{oauth_server.base}/v1/keys/{minted['id']}",
            headers={"Authorization": f"Bearer {oauth_server.key}"},
        )
        if revoked.status_code in (404, 405):
            pytest.skip("DELETE /v1/keys/{id} is not there yet")
        assert revoked.status_code == 200, revoked.text
        await assert_everything_made_with_the_key_ended(oauth_server, browser, client_id, tokens)
    finally:
        await browser.aclose()


async def test_a_key_revoked_between_sign_in_and_consent_is_refused_at_consent(
    oauth_server: OAuthServer,
) -> None:
    doomed = oauth_server.new_key()
    browser = Browser(doomed)
    try:
        consent = await signed_in(oauth_server, browser)
        forget_key_in_the_vault(oauth_server, doomed)
        answer = {**read_form(consent.text).fields, "scope": "memories:read", "decision": "allow"}
        refused = await browser.post(str(consent.url), answer)
    finally:
        await browser.aclose()
    assert refused.status_code == 400 and "location" not in refused.headers
    assert "revoked" in refused.text and "memory_key" in read_form(refused.text).inputs
