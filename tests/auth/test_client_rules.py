"""Client ids, redirect URIs and registrations: what the authorization server accepts, and
how it refuses the rest (OAuth error shapes, never a 500)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx2
import pytest

from tests.support.oauth import OAuthServer, authorize_url, pkce, register

UNPARSEABLE = [
    "https://0177.0.0.1/c.json",
    "https://127.000.000.001/c.json",
    "https://127.0.0.1:70000/c.json",
    "http://127.0.0.1:99999/c.json",
]


@pytest.fixture
def server_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """What the server logs (uvicorn's error logger does not propagate to the root)."""
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(caplog.handler)
    try:
        yield caplog
    finally:
        logger.removeHandler(caplog.handler)


def assert_no_traceback(log: pytest.LogCaptureFixture) -> None:
    assert [r for r in log.records if r.exc_info or r.levelno >= logging.ERROR] == []


@pytest.mark.parametrize("client_id", UNPARSEABLE)
def test_an_unparseable_client_id_is_a_clean_oauth_error_on_every_endpoint(
    oauth_server: OAuthServer, server_log: pytest.LogCaptureFixture, client_id: str
) -> None:
    _, challenge = pkce()
    authorize = httpx2.get(authorize_url(oauth_server, client_id, challenge))
    assert authorize.status_code == 400 and "location" not in authorize.headers
    # a person is at the browser: the refusal is a page, not JSON
    assert authorize.headers["content-type"].startswith("text/html")
    token = httpx2.post(
        oauth_server.base + "/token",
        data={
            "grant_type": "authorization_code",
            "client_id": client_id,
            "code": "c",
            "code_verifier": "v" * 43,
            "redirect_uri": "http://127.0.0.1:7777/callback",
        },
    )
    assert token.status_code == 401 and token.json()["error"] == "invalid_client"
    revoke = httpx2.post(oauth_server.base + "/revoke", data={"client_id": client_id, "token": "t"})
    assert revoke.status_code == 401 and revoke.json()["error"] == "invalid_client"
    assert_no_traceback(server_log)


def registration(server: OAuthServer, **fields: object) -> httpx2.Response:
    body = {
        "client_name": "Rules test client",
        "redirect_uris": ["http://127.0.0.1:7777/callback"],
        "token_endpoint_auth_method": "none",
        **fields,
    }
    return httpx2.post(server.base + "/register", json=body)


@pytest.mark.parametrize(
    "uri",
    [
        "ws://app.example/cb",
        "ftp://app.example/cb",
        "wss://app.example/cb",
        "myapp:/callback",
        "http://192.168.1.4/cb",
        "http://localhost.evil.example/cb",
    ],
)
def test_registration_refuses_redirect_schemes_outside_the_allowlist(
    oauth_server: OAuthServer, uri: str
) -> None:
    response = registration(oauth_server, redirect_uris=[uri])
    assert response.status_code == 400, uri
    assert response.json()["error"] == "invalid_redirect_uri"


@pytest.mark.parametrize(
    "uri",
    [
        "https://app.example/cb",
        "http://127.0.0.1:4321/cb",
        "http://[::1]/cb",
        "http://localhost/cb",
        "com.example.app:/callback",
    ],
)
def test_registration_accepts_https_loopback_http_and_reverse_domain_schemes(
    oauth_server: OAuthServer, uri: str
) -> None:
    assert registration(oauth_server, redirect_uris=[uri]).status_code == 201, uri


@pytest.mark.parametrize(
    "fields",
    [
        {"client_name": "n" * 201},
        {"client_uri": "https://app.example/" + "a" * 2000},
        {"logo_uri": "https://app.example/" + "a" * 2000},
        {"redirect_uris": ["https://app.example/" + "a" * 2000]},
        {"redirect_uris": [f"http://127.0.0.1/cb{i}" for i in range(11)]},
    ],
)
def test_registration_refuses_oversized_fields(
    oauth_server: OAuthServer, fields: dict[str, object]
) -> None:
    response = registration(oauth_server, **fields)
    assert response.status_code == 400
    assert response.json()["error"] in {"invalid_client_metadata", "invalid_redirect_uri"}


def test_a_registration_body_over_the_cap_is_413_before_it_is_read(
    oauth_server: OAuthServer,
) -> None:
    response = registration(oauth_server, contacts=["c" * 100 for _ in range(400)])
    assert response.status_code == 413 and response.json()["error"] == "invalid_request"


def test_the_registration_response_offers_refresh_tokens_whatever_was_asked(
    oauth_server: OAuthServer,
) -> None:
    response = registration(oauth_server, grant_types=["authorization_code"])
    assert response.status_code == 201
    assert set(response.json()["grant_types"]) == {"authorization_code", "refresh_token"}


@pytest.mark.parametrize(
    ("registered", "requested"),
    [
        ("http://localhost/callback", "http://localhost:53127/callback"),
        ("http://127.0.0.1:12345/callback", "http://127.0.0.1:40000/callback"),
        ("http://[::1]:8080/callback", "http://[::1]:9090/callback"),
    ],
)
def test_a_loopback_redirect_matches_on_any_port(
    oauth_server: OAuthServer, registered: str, requested: str
) -> None:
    client_id = register(oauth_server, [registered])
    _, challenge = pkce()
    url = authorize_url(oauth_server, client_id, challenge, redirect_uri=requested)
    response = httpx2.get(url)
    assert response.status_code == 302
    assert response.headers["location"].startswith(oauth_server.base + "/oauth/sign-in")


@pytest.mark.parametrize(
    "requested",
    ["https://localhost:53127/callback", "http://localhost:53127/other", "http://127.0.0.1/cb"],
)
def test_a_loopback_redirect_still_needs_the_same_scheme_host_and_path(
    oauth_server: OAuthServer, requested: str
) -> None:
    client_id = register(oauth_server, ["http://localhost/callback"])
    _, challenge = pkce()
    url = authorize_url(oauth_server, client_id, challenge, redirect_uri=requested)
    response = httpx2.get(url)
    assert response.status_code == 400 and "location" not in response.headers


@pytest.mark.parametrize(
    "uri",
    [
        "https://claude.ai@evil.example/cb",  # reads as claude.ai to a person
        "https://claude.ai:x@evil.example/cb",
        "http://claude.ai@127.0.0.1:7777/callback",
        "com.example.app://user@host/callback",
        "https://a.example/cb#",  # an empty fragment is a fragment
        "https://a.example/cb#frag",
        "http://127.0.0.1:7777/callback#",
    ],
)
def test_registration_refuses_a_redirect_uri_with_user_info_or_any_fragment(
    oauth_server: OAuthServer, uri: str
) -> None:
    response = registration(oauth_server, redirect_uris=[uri])
    assert response.status_code == 400, uri
    assert response.json()["error"] == "invalid_redirect_uri"


def test_a_loopback_redirect_with_user_info_does_not_match_the_registered_one(
    oauth_server: OAuthServer,
) -> None:
    client_id = register(oauth_server, ["http://127.0.0.1/callback"])
    _, challenge = pkce()
    for requested in [
        "http://claude.ai@127.0.0.1:5555/callback",
        "http://127.0.0.1:5555/callback#",
    ]:
        url = authorize_url(oauth_server, client_id, challenge, redirect_uri=requested)
        response = httpx2.get(url)
        assert response.status_code == 400 and "location" not in response.headers, requested
