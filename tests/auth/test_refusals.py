"""What the authorization server and the resource server refuse, one test each."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey

from tests.support.oauth import (
    REDIRECT_URI,
    Browser,
    OAuthServer,
    authorize_url,
    call_mcp,
    exchange,
    grant_tokens,
    pkce,
    read_form,
    refresh,
    register,
)

pytestmark = pytest.mark.anyio


def query_of(response: httpx2.Response) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(response.headers["location"]).query).items()}


def authorize_error(server: OAuthServer, url: str) -> str:
    """The error an /authorize request is answered with, by redirect or directly."""
    response = httpx2.get(url)
    if response.status_code == 302:
        return query_of(response).get("error", "")
    assert response.status_code == 400
    return str(response.json()["error"])


def test_an_authorization_request_without_pkce_is_refused(oauth_server: OAuthServer) -> None:
    client_id = register(oauth_server)
    url = authorize_url(oauth_server, client_id, "x")
    stripped = str(httpx2.URL(url).copy_remove_param("code_challenge"))
    assert authorize_error(oauth_server, stripped) == "invalid_request"


def test_plain_pkce_is_refused(oauth_server: OAuthServer) -> None:
    client_id = register(oauth_server)
    verifier, _ = pkce()
    url = authorize_url(oauth_server, client_id, verifier, code_challenge_method="plain")
    assert authorize_error(oauth_server, url) == "invalid_request"


async def test_a_wrong_code_verifier_is_invalid_grant(oauth_server: OAuthServer) -> None:
    client_id = register(oauth_server)
    _, challenge = pkce()
    browser = Browser(oauth_server.key)
    callback = await browser.authorize(authorize_url(oauth_server, client_id, challenge))
    await browser.aclose()
    wrong, _ = pkce()
    response = exchange(oauth_server, client_id, callback["code"], wrong)
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"


def test_an_unregistered_redirect_uri_is_refused_without_redirecting(
    oauth_server: OAuthServer,
) -> None:
    client_id = register(oauth_server)
    _, challenge = pkce()
    for other in ["https://evil.example/callback", "http://127.0.0.1:7777/other"]:
        url = authorize_url(oauth_server, client_id, challenge, redirect_uri=other)
        response = httpx2.get(url)
        assert response.status_code == 400 and "location" not in response.headers


def test_loopback_redirects_may_use_any_port(oauth_server: OAuthServer) -> None:
    client_id = register(oauth_server)
    _, challenge = pkce()
    url = authorize_url(
        oauth_server, client_id, challenge, redirect_uri="http://127.0.0.1:51234/callback"
    )
    response = httpx2.get(url)
    assert response.status_code == 302
    assert response.headers["location"].startswith(oauth_server.base + "/oauth/sign-in")


async def test_a_replayed_code_is_refused_and_revokes_what_it_issued(
    oauth_server: OAuthServer,
) -> None:
    client_id = register(oauth_server)
    verifier, challenge = pkce()
    browser = Browser(oauth_server.key)
    callback = await browser.authorize(authorize_url(oauth_server, client_id, challenge))
    await browser.aclose()
    first = exchange(oauth_server, client_id, callback["code"], verifier)
    assert first.status_code == 200
    assert call_mcp(oauth_server, first.json()["access_token"], "memory_status").status_code == 200
    again = exchange(oauth_server, client_id, callback["code"], verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert call_mcp(oauth_server, first.json()["access_token"], "memory_status").status_code == 401


async def test_refresh_tokens_rotate_and_a_reused_one_revokes_the_family(
    oauth_server: OAuthServer,
) -> None:
    client_id, tokens = await grant_tokens(oauth_server)
    rotated = refresh(oauth_server, client_id, tokens["refresh_token"])
    assert rotated.status_code == 200
    newer = rotated.json()
    assert newer["refresh_token"] != tokens["refresh_token"]
    assert call_mcp(oauth_server, newer["access_token"], "memory_status").status_code == 200
    reused = refresh(oauth_server, client_id, tokens["refresh_token"])
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    # the whole family is gone: the rotated refresh token and its access token too
    assert refresh(oauth_server, client_id, newer["refresh_token"]).status_code == 400
    assert call_mcp(oauth_server, newer["access_token"], "memory_status").status_code == 401


def forge(server: OAuthServer, key: ECKey | None = None, **claims: object) -> str:
    """A token with the real one's claims, changed; signed with ``key`` or the server's own."""
    now = int(time.time())
    base = {
        "iss": server.base,
        "sub": "v",
        "aud": server.mcp_url,
        "client_id": "c",
        "scope": "memories:read",
        "iat": now,
        "exp": now + 600,
        "gid": "g",
    }
    oauth = server.server.oauth
    assert oauth is not None
    if key is None:
        return oauth.signer.sign({**base, **claims})
    return jwt.encode({"alg": "ES256", "kid": oauth.signer.kid}, {**base, **claims}, key)


async def test_a_token_for_another_audience_is_401(oauth_server: OAuthServer) -> None:
    _, tokens = await grant_tokens(oauth_server)
    real = jwt.decode(tokens["access_token"], oauth_server.server.oauth.signer._public)  # type: ignore[union-attr]
    other = forge(oauth_server, **{**real.claims, "aud": "http://127.0.0.1:1/mcp"})
    response = call_mcp(oauth_server, other, "memory_status")
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    same = forge(oauth_server, **real.claims)
    assert call_mcp(oauth_server, same, "memory_status").status_code == 200


async def test_an_authorization_request_for_another_resource_is_invalid_target(
    oauth_server: OAuthServer,
) -> None:
    client_id = register(oauth_server)
    _, challenge = pkce()
    url = authorize_url(oauth_server, client_id, challenge, resource="https://other.example/mcp")
    assert authorize_error(oauth_server, url) == "invalid_target"


async def test_an_expired_token_is_401(oauth_server: OAuthServer) -> None:
    _, tokens = await grant_tokens(oauth_server)
    assert call_mcp(oauth_server, tokens["access_token"], "memory_status").status_code == 200
    oauth_server.clock.advance(901)
    response = call_mcp(oauth_server, tokens["access_token"], "memory_status")
    assert response.status_code == 401


async def test_a_forged_signature_is_401(oauth_server: OAuthServer) -> None:
    _, tokens = await grant_tokens(oauth_server)
    real = jwt.decode(tokens["access_token"], oauth_server.server.oauth.signer._public)  # type: ignore[union-attr]
    stranger = ECKey.generate_key("P-256", private=True)
    forged = forge(oauth_server, stranger, **real.claims)
    assert call_mcp(oauth_server, forged, "memory_status").status_code == 401
    header, payload, signature = tokens["access_token"].split(".")
    tampered = f"{header}.{payload}.{signature[:-4]}AAAA"
    assert call_mcp(oauth_server, tampered, "memory_status").status_code == 401


async def test_a_consent_post_without_the_csrf_token_or_cookie_is_403(
    oauth_server: OAuthServer,
) -> None:
    client_id = register(oauth_server)
    _, challenge = pkce()
    async with httpx2.AsyncClient() as browser:
        started = await browser.get(authorize_url(oauth_server, client_id, challenge))
        page = await browser.get(started.headers["location"])
        form = read_form(page.text)
        signed = await browser.post(
            oauth_server.base + "/oauth/sign-in",
            data={**form.fields, "memory_key": oauth_server.key},
        )
        consent = await browser.get(oauth_server.base + signed.headers["location"])
        fields = read_form(consent.text).fields
        target = oauth_server.base + "/oauth/consent"
        without = {"scope": "memories:read", "decision": "allow"}
        assert (await browser.post(target, data=without)).status_code == 403
        wrong = {**without, "csrf": "guess"}
        assert (await browser.post(target, data=wrong)).status_code == 403
    # the right token from a client without the cookie (another site's auto-submitted form)
    cookieless = httpx2.post(target, data={**without, "csrf": fields["csrf"]})
    assert cookieless.status_code == 403


def test_an_unknown_client_is_refused_at_authorize_and_401_at_token(
    oauth_server: OAuthServer,
) -> None:
    _, challenge = pkce()
    url = authorize_url(oauth_server, "no-such-client", challenge)
    response = httpx2.get(url)
    assert response.status_code == 400 and "location" not in response.headers
    token = exchange(oauth_server, "no-such-client", "code", "verifier")
    assert token.status_code == 401 and token.json()["error"] == "invalid_client"


async def test_a_deleted_client_gets_401_invalid_client_so_it_registers_again(
    oauth_server: OAuthServer,
) -> None:
    client_id, tokens = await grant_tokens(oauth_server)
    oauth_server.server.oauth.store.delete_client(client_id)  # type: ignore[union-attr]
    response = refresh(oauth_server, client_id, tokens["refresh_token"])
    assert response.status_code == 401 and response.json()["error"] == "invalid_client"
    assert call_mcp(oauth_server, tokens["access_token"], "memory_status").status_code == 401


async def test_a_refresh_cannot_widen_the_granted_scopes(oauth_server: OAuthServer) -> None:
    client_id, tokens = await grant_tokens(oauth_server, scope="memories:read")
    assert tokens["scope"] == "memories:read"
    wider = refresh(
        oauth_server, client_id, tokens["refresh_token"], "memories:read memories:delete"
    )
    assert wider.status_code == 400 and wider.json()["error"] == "invalid_scope"


async def test_a_tampered_consent_cannot_add_scopes_beyond_the_request_or_the_key(
    oauth_server: OAuthServer,
) -> None:
    read_only = oauth_server.new_key(read_only=True)
    client_id = register(oauth_server)
    verifier, challenge = pkce()
    async with httpx2.AsyncClient() as browser:
        started = await browser.get(authorize_url(oauth_server, client_id, challenge))
        page = await browser.get(started.headers["location"])
        signed = await browser.post(
            oauth_server.base + "/oauth/sign-in",
            data={**read_form(page.text).fields, "memory_key": read_only},
        )
        consent = await browser.get(oauth_server.base + signed.headers["location"])
        form = read_form(consent.text)
        assert form.scopes == ["memories:read"] and form.disabled == ["scope-memories-write"]
        done = await browser.post(
            oauth_server.base + "/oauth/consent",
            data={
                **form.fields,
                "scope": ["memories:read", "memories:write", "memories:delete"],
                "decision": "allow",
            },
        )
    code = query_of(done)["code"]
    tokens = exchange(oauth_server, client_id, code, verifier).json()
    assert tokens["scope"] == "memories:read"
    refused = call_mcp(oauth_server, tokens["access_token"], "store_memory", content="x")
    assert refused.status_code == 403
    assert 'scope="memories:write"' in refused.headers["www-authenticate"]


async def test_denying_consent_redirects_with_access_denied_and_iss(
    oauth_server: OAuthServer,
) -> None:
    client_id = register(oauth_server)
    _, challenge = pkce()
    browser = Browser(oauth_server.key, decision="deny")
    callback = await browser.authorize(authorize_url(oauth_server, client_id, challenge))
    await browser.aclose()
    assert callback == {"error": "access_denied", "state": "st4te", "iss": oauth_server.base}


async def test_a_wrong_memory_key_is_not_accepted_and_never_echoed(
    oauth_server: OAuthServer,
) -> None:
    client_id = register(oauth_server)
    _, challenge = pkce()
    wrong = "mk_" + "w" * 43
    async with httpx2.AsyncClient() as browser:
        started = await browser.get(authorize_url(oauth_server, client_id, challenge))
        page = await browser.get(started.headers["location"])
        answer = await browser.post(
            oauth_server.base + "/oauth/sign-in",
            data={**read_form(page.text).fields, "memory_key": wrong},
        )
    assert answer.status_code == 400 and wrong not in answer.text
    assert 'role="alert"' in answer.text


async def test_revoking_a_refresh_token_ends_the_grant(oauth_server: OAuthServer) -> None:
    client_id, tokens = await grant_tokens(oauth_server)
    response = httpx2.post(
        oauth_server.base + "/revoke",
        data={"client_id": client_id, "token": tokens["refresh_token"]},
    )
    assert response.status_code == 200
    assert refresh(oauth_server, client_id, tokens["refresh_token"]).status_code == 400
    assert call_mcp(oauth_server, tokens["access_token"], "memory_status").status_code == 401


async def test_revoking_an_access_token_ends_the_grant(oauth_server: OAuthServer) -> None:
    client_id, tokens = await grant_tokens(oauth_server)
    httpx2.post(
        oauth_server.base + "/revoke",
        data={"client_id": client_id, "token": tokens["access_token"]},
    )
    assert call_mcp(oauth_server, tokens["access_token"], "memory_status").status_code == 401


def test_registration_refuses_http_redirects_off_loopback(oauth_server: OAuthServer) -> None:
    for uri in ["http://evil.example/cb", "javascript:alert(1)", "https://a.example/cb#frag"]:
        response = httpx2.post(
            oauth_server.base + "/register",
            json={"redirect_uris": [uri], "token_endpoint_auth_method": "none"},
        )
        assert response.status_code == 400, uri
        assert response.json()["error"] in {"invalid_redirect_uri", "invalid_client_metadata"}


async def test_a_token_request_for_another_resource_is_invalid_target(
    oauth_server: OAuthServer,
) -> None:
    client_id = register(oauth_server)
    verifier, challenge = pkce()
    browser = Browser(oauth_server.key)
    callback = await browser.authorize(authorize_url(oauth_server, client_id, challenge))
    await browser.aclose()
    response = httpx2.post(
        oauth_server.base + "/token",
        data={
            "grant_type": "authorization_code",
            "client_id": client_id,
            "code": callback["code"],
            "code_verifier": verifier,
            "redirect_uri": REDIRECT_URI,
            "resource": "https://other.example/mcp",
        },
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_target"


async def test_a_resource_with_a_trailing_slash_or_upper_case_host_is_the_same_resource(
    oauth_server: OAuthServer,
) -> None:
    variant = oauth_server.mcp_url.replace("http://127.0.0.1", "HTTP://127.0.0.1") + "/"
    _, tokens = await grant_tokens(oauth_server, resource=variant)
    assert call_mcp(oauth_server, tokens["access_token"], "memory_status").status_code == 200


@pytest.mark.parametrize(
    "challenge",
    [
        "abc",  # the attack's 3 characters
        "a" * 42,
        "a" * 129,
        "a" * 42 + "=",  # padded base64
        "a" * 42 + "+",  # base64, not base64url
        "a" * 42 + " ",
        "a" * 43 + "\n",
    ],
)
def test_a_code_challenge_outside_43_to_128_unreserved_characters_is_invalid_request(
    oauth_server: OAuthServer, challenge: str
) -> None:
    client_id = register(oauth_server)
    url = authorize_url(oauth_server, client_id, challenge)
    assert authorize_error(oauth_server, url) == "invalid_request"


@pytest.mark.parametrize("challenge", ["a" * 43, "A-z0._~" * 18 + "xx"])
def test_a_code_challenge_of_43_to_128_unreserved_characters_is_accepted(
    oauth_server: OAuthServer, challenge: str
) -> None:
    assert len(challenge) in (43, 128)
    client_id = register(oauth_server)
    response = httpx2.get(authorize_url(oauth_server, client_id, challenge))
    assert response.status_code == 302
    assert response.headers["location"].startswith(oauth_server.base + "/oauth/sign-in")


@pytest.mark.parametrize("fragment", ["#", "#part"])
async def test_a_resource_with_a_fragment_is_invalid_target_at_authorize_and_token(
    oauth_server: OAuthServer, fragment: str
) -> None:
    client_id = register(oauth_server)
    verifier, challenge = pkce()
    resource = oauth_server.mcp_url + fragment
    url = authorize_url(oauth_server, client_id, challenge, resource=resource)
    assert authorize_error(oauth_server, url) == "invalid_target"
    browser = Browser(oauth_server.key)
    callback = await browser.authorize(authorize_url(oauth_server, client_id, challenge))
    await browser.aclose()
    response = httpx2.post(
        oauth_server.base + "/token",
        data={
            "grant_type": "authorization_code",
            "client_id": client_id,
            "code": callback["code"],
            "code_verifier": verifier,
            "redirect_uri": REDIRECT_URI,
            "resource": resource,
        },
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_target"


async def started_sign_in(
    server: OAuthServer, browser: httpx2.AsyncClient
) -> tuple[str, dict[str, str]]:
    """An authorization started in ``browser``: the sign-in page's URL and form fields."""
    client_id = register(server)
    _, challenge = pkce()
    started = await browser.get(authorize_url(server, client_id, challenge))
    page = await browser.get(started.headers["location"])
    return str(page.url), read_form(page.text).fields


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://127.0.0.1:1"])
async def test_a_sign_in_or_consent_form_posted_from_another_origin_is_403(
    oauth_server: OAuthServer, origin: str
) -> None:
    async with httpx2.AsyncClient() as browser:
        sign_in, fields = await started_sign_in(oauth_server, browser)
        posted = {**fields, "memory_key": oauth_server.key}
        foreign = await browser.post(sign_in, data=posted, headers={"Origin": origin})
        assert foreign.status_code == 403 and "text/html" in foreign.headers["content-type"]
        assert "start connecting again" in foreign.text  # what to do
        # the same form from this server's own page goes through, and so does the consent
        own = await browser.post(sign_in, data=posted, headers={"Origin": oauth_server.base})
        assert own.status_code == 303
        consent = await browser.get(oauth_server.base + own.headers["location"])
        form = {**read_form(consent.text).fields, "scope": "memories:read", "decision": "allow"}
        target = oauth_server.base + "/oauth/consent"
        refused = await browser.post(target, data=form, headers={"Origin": origin})
        assert refused.status_code == 403 and "location" not in refused.headers
        allowed = await browser.post(target, data=form)  # no Origin: a browser may omit it
        assert allowed.status_code == 303 and "code" in query_of(allowed)
