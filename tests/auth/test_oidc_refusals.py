"""Sign-in with an identity provider refuses every ID token it must refuse, with a page that
says why: another issuer, another audience, another sign-in's nonce, an expired token, one
signed by a key the provider does not publish, a person the operator's lists do not admit,
a callback replayed or from another browser. The provider here is a double at the seam (a
server on loopback that answers discovery, its keys and the token endpoint with the ID token
each test chooses); the certified provider runs in test_oidc_signin.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_memoryrouter.auth.signin.oidc import Identity, admitted, check_claims
from mcp_memoryrouter.edge.ratelimit import TokenBuckets
from tests.support import live_server, rate_limits
from tests.support.oauth import (
    OAuthServer,
    authorize_url,
    oauth_server_at,
    pkce,
    read_form,
    register,
)

CLIENT_ID, SECRET = "memoryrouter", "s3cret"


@dataclass
class Provider:
    """Discovery, JWKS and a token endpoint; ``claims`` is what the next ID token says
    (``nonce`` filled from the authorization request unless a test sets it)."""

    key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256", {"kid": "k1"}, True))
    stranger: ECKey = field(
        default_factory=lambda: ECKey.generate_key("P-256", {"kid": "k1"}, True)
    )
    issuer: str = ""
    claims: dict[str, Any] = field(default_factory=dict)
    sign_with_stranger: bool = False
    codes: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        async def discovery(_: Request) -> JSONResponse:
            return JSONResponse(
                {
                    "issuer": self.issuer,
                    "authorization_endpoint": self.issuer + "/auth",
                    "token_endpoint": self.issuer + "/token",
                    "jwks_uri": self.issuer + "/jwks",
                }
            )

        async def jwks(_: Request) -> JSONResponse:
            return JSONResponse(KeySet([self.key]).as_dict(private=False))

        async def token(request: Request) -> JSONResponse:
            form = await request.form()
            self.codes.append(str(form.get("code")))
            key = self.stranger if self.sign_with_stranger else self.key
            header = {"alg": "ES256", "kid": "k1"}
            return JSONResponse({"id_token": jwt.encode(header, self.claims, key)})

        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", discovery),
                Route("/jwks", jwks),
                Route("/token", token, methods=["POST"]),
            ]
        )


@pytest.fixture(scope="module")
def shared(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Provider, OAuthServer, list[TokenBuckets]]]:
    """One provider double and one server signing in with it for the module (building a
    server costs half a second): each test gets the double as new and every rate limit
    full; a test that counts vaults counts what it made."""
    double = Provider()
    with live_server(double.app()) as url:
        double.issuer = url
        with oauth_server_at(
            tmp_path_factory.mktemp("oidc"),
            signin="oidc",
            oidc_issuer=double.issuer,
            oidc_client_id=CLIENT_ID,
            oidc_client_secret=SECRET,
            oidc_allowed_domains=["example.org"],
        ) as running:
            yield double, running, rate_limits(running.server.app)


@pytest.fixture
def provider(shared: tuple[Provider, OAuthServer, list[TokenBuckets]]) -> Provider:
    double, _, _ = shared
    double.claims, double.sign_with_stranger, double.codes = {}, False, []
    return double


@pytest.fixture
def server(
    shared: tuple[Provider, OAuthServer, list[TokenBuckets]], provider: Provider
) -> Iterator[OAuthServer]:
    _, running, limits = shared
    yield running
    for buckets in limits:
        buckets._buckets.clear()


def good_claims(provider: Provider, sent_nonce: str, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "iss": provider.issuer,
        "aud": CLIENT_ID,
        "sub": "person-1",
        "email": "ada@example.org",
        "email_verified": True,
        "iat": now,
        "exp": now + 300,
        "nonce": sent_nonce,
    }
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def to_provider(server: OAuthServer, http: httpx2.Client) -> tuple[str, str]:
    """A connector starts; the sign-in page's button sends the browser to the provider:
    (state, nonce) of that request."""
    client_id = register(server)
    _, challenge = pkce()
    first = http.get(authorize_url(server, client_id, challenge))
    assert first.status_code == 302, first.text
    page = http.get(first.headers["location"])
    assert page.status_code == 200
    assert "memory_key" not in page.text  # no key is ever typed
    form = read_form(page.text)
    sent = http.post(server.base + "/oauth/oidc/start", data=form.fields)
    assert sent.status_code == 303, sent.text
    query = parse_qs(urlsplit(sent.headers["location"]).query)
    assert query["client_id"] == [CLIENT_ID] and query["code_challenge_method"] == ["S256"]
    return query["state"][0], query["nonce"][0]


def come_back(server: OAuthServer, http: httpx2.Client, state: str) -> httpx2.Response:
    return http.get(server.base + "/oauth/oidc/callback", params={"code": "c0de", "state": state})


def test_a_good_token_signs_in_and_reaches_consent(server: OAuthServer, provider: Provider) -> None:
    with httpx2.Client(timeout=30) as http:
        state, nonce = to_provider(server, http)
        provider.claims = good_claims(provider, nonce)
        back = come_back(server, http, state)
        assert back.status_code == 303, back.text
        assert back.headers["location"] == "/oauth/consent"
        consent = http.get(server.base + "/oauth/consent")
        assert consent.status_code == 200 and "Allow" in consent.text
        # the same callback again is refused: a state is used once
        again = come_back(server, http, state)
        assert again.status_code == 400 and "already used" in again.text


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"iss": "https://elsewhere.example"}, "not from"),
        ({"aud": "another-app"}, "another application"),
        ({"aud": [CLIENT_ID, "another-app"]}, "another application"),  # no azp
        ({"nonce": "not-this-sign-in"}, "another sign-in"),
        ({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, "expired"),
        ({"iat": int(time.time()) + 3600}, "in the future"),
        ({"email": "eve@evil.example"}, "may not sign in"),
        ({"email_verified": None}, "no verified"),
        ({"sub": None}, "names nobody"),
    ],
)
def test_a_token_that_does_not_check_out_is_refused_with_why(
    server: OAuthServer, provider: Provider, change: dict[str, Any], says: str
) -> None:
    vaults = server.service.vault_count()
    with httpx2.Client(timeout=30) as http:
        state, nonce = to_provider(server, http)
        provider.claims = good_claims(provider, nonce, **change)
        back = come_back(server, http, state)
        assert back.status_code in (400, 403), back.status_code
        assert "Sign-in refused" in back.text and says in back.text, back.text
        assert "Nothing was shared" in back.text
        assert http.get(server.base + "/oauth/consent").status_code != 200
    assert server.service.vault_count() == vaults  # no vault was made for anyone refused


def test_a_token_signed_by_a_key_the_provider_does_not_publish_is_refused(
    server: OAuthServer, provider: Provider
) -> None:
    provider.sign_with_stranger = True  # same kid, another key
    with httpx2.Client(timeout=30) as http:
        state, nonce = to_provider(server, http)
        provider.claims = good_claims(provider, nonce)
        back = come_back(server, http, state)
        assert back.status_code == 403
        assert "not signed by any of its keys" in back.text


def test_a_callback_in_another_browser_is_refused(server: OAuthServer, provider: Provider) -> None:
    with httpx2.Client(timeout=30) as mine, httpx2.Client(timeout=30) as theirs:
        state, nonce = to_provider(server, mine)
        provider.claims = good_claims(provider, nonce)
        stolen = come_back(server, theirs, state)
        assert stolen.status_code == 400
        assert "another browser" in stolen.text
    assert provider.codes == []  # the code was never even exchanged


def test_the_provider_saying_no_is_shown(server: OAuthServer, provider: Provider) -> None:
    with httpx2.Client(timeout=30) as http:
        state, _ = to_provider(server, http)
        back = http.get(
            server.base + "/oauth/oidc/callback",
            params={"state": state, "error": "access_denied", "error_description": "Denied"},
        )
        assert back.status_code == 403 and "did not sign you in: Denied" in back.text


def test_the_memory_key_form_is_refused_when_sign_in_is_delegated(
    server: OAuthServer,
) -> None:
    with httpx2.Client(timeout=30) as http:
        client_id = register(server)
        _, challenge = pkce()
        first = http.get(authorize_url(server, client_id, challenge))
        page = http.get(first.headers["location"])
        form = read_form(page.text)
        posted = http.post(
            server.base + "/oauth/sign-in", data={**form.fields, "memory_key": server.key}
        )
        assert posted.status_code == 403


def test_the_rules_alone() -> None:
    person = Identity("https://idp", "s", "Ada@Example.org", True)
    assert admitted(person, (), ()) is None
    assert admitted(person, ("example.org",), ()) is None
    assert admitted(person, (), ("ada@example.org",)) is None
    assert admitted(person, ("other.org",), ()) is not None
    unverified = Identity("https://idp", "s", "ada@example.org", False)
    assert admitted(unverified, ("example.org",), ()) is not None
    claims = {"iss": "i", "aud": ["c", "d"], "azp": "c", "exp": 200, "nonce": "n", "sub": "s"}
    assert check_claims(claims, issuer="i", client_id="c", nonce="n", now=100).subject == "s"
    assert json.dumps(claims)  # unchanged
