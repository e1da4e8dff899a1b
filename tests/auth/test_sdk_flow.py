"""The whole OAuth flow with the MCP SDK's own OAuth client against a real uvicorn:
discovery, registration, authorization with sign-in and consent, tokens, tool calls, and a
403 step-up from a read-only grant to a wider one."""

from __future__ import annotations

import pytest

from tests.support.mcp import ok
from tests.support.oauth import FIRST_CONNECTION, Browser, Flow, OAuthServer, read_form

pytestmark = pytest.mark.anyio


async def test_discovery_registration_consent_and_tool_calls_with_the_sdk_client(
    oauth_server: OAuthServer,
) -> None:
    browser = Browser(oauth_server.key)
    flow = Flow(oauth_server, browser)
    try:
        async with flow.client(oauth_server) as client:
            status = ok(await client.call_tool("memory_status", {}))
            assert status["granted_scopes"] == FIRST_CONNECTION
            assert status["vault"] == oauth_server.vault_of(oauth_server.key)
            stored = ok(await client.call_tool("store_memory", {"content": "one sign-in"}))
    finally:
        await browser.aclose()
    assert stored is not None
    assert len(flow.callbacks) == 1 and browser.sign_ins == 1  # storing asked for nothing more
    assert flow.callbacks[0]["iss"] == oauth_server.base
    assert flow.storage.client is not None and flow.storage.client.client_id
    assert (
        "resource=" in flow.authorize_urls[0]
        and "code_challenge_method=S256" in (flow.authorize_urls[0])
    )
    tokens = flow.storage.tokens
    assert tokens is not None and tokens.refresh_token and tokens.expires_in == 900
    assert oauth_server.key not in tokens.access_token  # the key never leaves the server


async def test_a_delete_steps_up_on_403_with_consent_only_and_the_retried_call_succeeds(
    oauth_server: OAuthServer,
) -> None:
    browser = Browser(oauth_server.key)
    flow = Flow(oauth_server, browser)
    try:
        async with flow.client(oauth_server) as client:
            ok(await client.call_tool("search_memories", {"query": "anything"}))
            assert browser.consent_scopes == ["memories:read", "memories:write", "memories:reflect"]
            deleted = ok(await client.call_tool("delete_memories", {"ids": ["nothing"]}))
            assert browser.consent_scopes[-1] == "memories:delete"
            status = ok(await client.call_tool("memory_status", {}))
    finally:
        await browser.aclose()
    assert deleted is not None
    assert status["granted_scopes"] == sorted([*FIRST_CONNECTION, "memories:delete"])
    assert len(flow.callbacks) == 2  # one consent, then one step-up
    assert browser.sign_ins == 1  # the step-up showed consent only: the browser was signed in


async def test_the_step_up_consent_ticks_what_was_asked_names_the_new_request_and_allow_grants_it(
    oauth_server: OAuthServer,
) -> None:
    """The person clicks Allow on each page as it stands: after the 403 for delete, the page
    says what the app now asks for, with it ticked, and the retried delete succeeds."""
    browser = Browser(oauth_server.key)
    flow = Flow(oauth_server, browser)
    try:
        async with flow.client(oauth_server) as client:
            ok(await client.call_tool("store_memory", {"content": "soon forgotten"}))
            found = ok(await client.call_tool("search_memories", {"query": "forgotten"}))
            deleted = ok(
                await client.call_tool("delete_memories", {"ids": [found["memories"][0]["id"]]})
            )
    finally:
        await browser.aclose()
    first, step_up = (read_form(page) for page in browser.consents)
    assert sorted(first.ticked) == FIRST_CONNECTION and first.new == []
    assert sorted(step_up.ticked) == sorted([*FIRST_CONNECTION, "memories:delete"])
    assert step_up.new == ["memories:delete"]  # only what was not granted before
    assert "now asks to <strong>delete memories</strong>" in browser.consents[1]
    assert "<title>Allow more access?" in browser.consents[1]
    assert deleted["deleted"] == 1
