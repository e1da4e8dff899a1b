"""A host that does not sign in again by itself (Claude, on an expired or revoked token, or
after a refused refresh) leaves the person only the server's words: the 401's challenge and
body, the refused refresh, and the error an MCP client shows for the call all say that the
person must reconnect, and where."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.support.oauth import Browser, OAuthServer, call_mcp, grant_tokens, refresh

pytestmark = pytest.mark.anyio
RECONNECT = "reconnect MemoryRouter in your client's connector settings"
WHERE = "Claude: Settings > Connectors; ChatGPT: Settings > Apps & Connectors"


def refused_words(response: httpx2.Response, error: str) -> str:
    """The 401's words: the same in the challenge and in the body, a JSON-RPC error carrying
    the OAuth error."""
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert f'error="{error}"' in challenge
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["data"]["error"] == error
    words: str = body["error"]["message"]
    assert f'error_description="{words}"' in challenge
    return words


@contextmanager
def host_error() -> Iterator[list[MCPError]]:
    """What the MCP SDK's client raises for the call: the error a host shows."""
    caught: list[MCPError] = []
    try:
        yield caught
    except* MCPError as group:
        caught += leaves(group)
    assert caught, "the call did not fail"


def leaves(group: BaseExceptionGroup[MCPError]) -> list[MCPError]:
    """The errors in ``group``, however deeply the SDK's task groups nested them."""
    found: list[MCPError] = []
    for one in group.exceptions:
        found += leaves(one) if isinstance(one, BaseExceptionGroup) else [one]
    return found


async def call_as_a_host(server: OAuthServer, token: str | None) -> None:
    """A host calling a tool with the token it holds (or none), never signing in again."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(server.mcp_url, http_client=http)) as client,
    ):
        await client.call_tool("memory_status", {})


async def test_an_expired_access_token_is_401_saying_the_person_must_reconnect_and_where(
    oauth_server: OAuthServer,
) -> None:
    _, tokens = await grant_tokens(oauth_server)
    oauth_server.clock.advance(901)  # past the 15 minutes an access token lasts
    words = refused_words(
        call_mcp(oauth_server, tokens["access_token"], "memory_status"), "invalid_token"
    )
    assert "expired" in words and RECONNECT in words and WHERE in words
    with host_error() as caught:
        await call_as_a_host(oauth_server, tokens["access_token"])
    assert RECONNECT in caught[0].message  # not the SDK's bare "Server returned an error"


async def test_after_a_refused_refresh_the_hosts_call_fails_saying_where_to_reconnect(
    oauth_server: OAuthServer,
) -> None:
    auth = {"Authorization": f"Bearer {oauth_server.key}"}
    minted = httpx2.post(oauth_server.base + "/v1/keys", json={"name": "laptop"}, headers=auth)
    assert minted.status_code == 201
    browser = Browser(minted.json()["key"])
    try:
        client_id, tokens = await grant_tokens(oauth_server, browser=browser)
    finally:
        await browser.aclose()
    revoked = httpx2.delete(f"{oauth_server.base}/v1/keys/{minted.json()['id']}", headers=auth)
    assert revoked.status_code in (200, 204)
    renewed = refresh(oauth_server, client_id, tokens["refresh_token"])
    assert renewed.status_code == 400 and renewed.json()["error"] == "invalid_grant"
    assert RECONNECT in renewed.json()["error_description"]
    again = refresh(oauth_server, client_id, tokens["refresh_token"])  # spent: unknown now
    assert again.status_code == 400 and RECONNECT in again.json()["error_description"]
    # the host calls on with the token it still holds, or drops it and sends none
    for token, error in ((tokens["access_token"], "invalid_token"), (None, "invalid_request")):
        if token is None:
            refused = httpx2.post(oauth_server.mcp_url, json={}, timeout=30)
        else:
            refused = call_mcp(oauth_server, token, "memory_status")
        words = refused_words(refused, error)
        assert "MemoryRouter" in words and WHERE in words
        with host_error() as caught:
            await call_as_a_host(oauth_server, token)
        assert WHERE in caught[0].message


async def test_a_refused_memory_key_says_where_keys_come_from_not_to_reconnect(
    oauth_server: OAuthServer,
) -> None:
    words = refused_words(call_mcp(oauth_server, "mk_unknown", "memory_status"), "invalid_token")
    assert "keys list" in words and "connector settings" not in words
