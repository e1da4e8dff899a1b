"""The authorization server's endpoints are rate limited per client address, their bodies
are capped before they are parsed, and registrations no one used are forgotten."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from mcp_memoryrouter.auth.state.store import AUTH_DB_FILE
from tests.support.oauth import (
    OAuthServer,
    authorize_url,
    grant_tokens,
    pkce,
    register,
)

pytestmark = pytest.mark.anyio

REGISTRATION = {
    "client_name": "Limits test client",
    "redirect_uris": ["http://127.0.0.1:7777/callback"],
    "token_endpoint_auth_method": "none",
}
BAD_TOKEN_REQUEST = {"grant_type": "authorization_code", "client_id": "nobody", "code": "c"}


def assert_rate_limited_json(response: httpx2.Response) -> int:
    assert response.status_code == 429
    assert response.json()["error"] == "temporarily_unavailable"
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["access-control-allow-origin"] == "*"  # browser clients read it
    return int(response.headers["retry-after"])


def test_registrations_past_the_burst_are_429_until_the_bucket_refills(
    oauth_server: OAuthServer,
) -> None:
    url = oauth_server.base + "/register"
    assert [httpx2.post(url, json=REGISTRATION).status_code for _ in range(10)] == [201] * 10
    refused = httpx2.post(url, json=REGISTRATION)
    # two a minute: one every 30 s, less the (real) time the burst took
    assert 20 <= assert_rate_limited_json(refused) <= 30
    oauth_server.clock.advance(30)
    assert httpx2.post(url, json=REGISTRATION).status_code == 201


async def test_the_oauth_endpoints_and_pages_share_one_budget_per_address(
    oauth_server: OAuthServer,
) -> None:
    app = oauth_server.server.app
    transport = httpx2.ASGITransport(app=app, client=("198.51.100.7", 4000))
    async with httpx2.AsyncClient(transport=transport, base_url=oauth_server.base) as http:
        answers = [
            (await http.post("/token", data=BAD_TOKEN_REQUEST)).status_code for _ in range(60)
        ]
        assert 429 not in answers
        assert_rate_limited_json(await http.post("/token", data=BAD_TOKEN_REQUEST))
        assert_rate_limited_json(await http.post("/revoke", data={"token": "t"}))
        _, challenge = pkce()
        assert_rate_limited_json(await http.get(authorize_url(oauth_server, "c", challenge)))
        page = await http.get("/oauth/sign-in?request=r")
        assert page.status_code == 429 and page.headers["content-type"].startswith("text/html")
        assert int(page.headers["retry-after"]) >= 1
        # discovery, the MCP endpoint and the REST API are not this budget's
        metadata = await http.get("/.well-known/oauth-authorization-server")
        assert metadata.status_code == 200
        stats = await http.get("/v1/keys/current", headers={"X-Memory-Key": oauth_server.key})
        assert stats.status_code == 200
    other = httpx2.ASGITransport(app=app, client=("198.51.100.8", 4000))
    async with httpx2.AsyncClient(transport=other, base_url=oauth_server.base) as http:
        assert (await http.post("/token", data=BAD_TOKEN_REQUEST)).status_code != 429


def test_a_form_post_over_the_cap_is_413_in_the_endpoints_own_shape(
    oauth_server: OAuthServer,
) -> None:
    big = {**BAD_TOKEN_REQUEST, "code": "c" * 20_000}
    token = httpx2.post(oauth_server.base + "/token", data=big)
    assert token.status_code == 413 and token.json()["error"] == "invalid_request"
    page = httpx2.post(oauth_server.base + "/oauth/sign-in", data={"memory_key": "k" * 20_000})
    assert page.status_code == 413 and page.headers["content-type"].startswith("text/html")


def test_a_chunked_body_over_the_cap_is_413_without_a_content_length(
    oauth_server: OAuthServer,
) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"client_name": "'
        for _ in range(100):
            yield b"n" * 1000
        yield b'", "redirect_uris": ["http://127.0.0.1:7777/callback"]}'

    response = httpx2.post(
        oauth_server.base + "/register",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 413 and response.json()["error"] == "invalid_request"


@pytest.mark.own_server  # measures the authorization server's file
def test_hundreds_of_huge_registrations_store_nothing(
    oauth_server: OAuthServer, tmp_path: Path
) -> None:
    database = tmp_path / AUTH_DB_FILE
    before = database.stat().st_size
    body = {**REGISTRATION, "client_name": "n" * 60_000}
    answers = {
        httpx2.post(oauth_server.base + "/register", json=body).status_code for _ in range(300)
    }
    assert answers <= {413, 429}
    assert database.stat().st_size - before < 64 * 1024


async def test_a_registration_no_one_authorized_with_is_forgotten_after_a_day(
    oauth_server: OAuthServer,
) -> None:
    oauth = oauth_server.server.oauth
    assert oauth is not None
    unused = register(oauth_server)
    used, _ = await grant_tokens(oauth_server)
    oauth_server.clock.advance(86_400 - 60)
    register(oauth_server)  # a write sweeps: neither is a day old yet
    assert oauth.store.client(unused) is not None
    oauth_server.clock.advance(120)
    register(oauth_server)
    assert oauth.store.client(unused) is None
    assert oauth.store.client(used) is not None
    _, challenge = pkce()
    refused = httpx2.get(authorize_url(oauth_server, unused, challenge))
    assert refused.status_code == 400 and "location" not in refused.headers
