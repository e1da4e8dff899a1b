"""Whole connections with Debian's chromium as the user's browser: the MCP SDK's OAuth client
(what claude.ai does) signing in once for ordinary use and stepping up to delete with consent
only, the person clicking Allow on each page as it stands; and a Claude Code-style client (a
client ID metadata document, a loopback redirect on a port chosen at connection time).
Skipped only where /usr/bin/chromium is absent."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from mcp.client import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from playwright.async_api import Browser, BrowserContext, Route, async_playwright
from pydantic import AnyUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route as StarletteRoute

from tests.support import CHROMIUM, CHROMIUM_ARGS
from tests.support.mcp import ok
from tests.support.oauth import REDIRECT_URI, MemoryStorage, OAuthServer, call_mcp, pkce, serve

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's /usr/bin/chromium"),
]


@pytest.fixture
async def chromium() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            await browser.close()


class Person:
    """Someone at the browser: types the key when asked, clicks Allow on the consent page as
    it stands (what the app asked for is ticked)."""

    def __init__(self, context: BrowserContext, key: str, callback_prefix: str) -> None:
        self.context = context
        self.key = key
        self.callback_prefix = callback_prefix
        self.key_fields_seen = 0
        self.ticked_by_default: list[list[str]] = []
        self.marked_new: list[list[str]] = []  # the scopes each consent marked a new request
        self.landed: list[str] = []

    async def connect(self, url: str) -> dict[str, str]:
        """Open an authorization URL, sign in if asked, allow; the callback's query."""
        page = await self.context.new_page()

        async def callback(route: Route) -> None:
            self.landed.append(route.request.url)
            await route.fulfill(status=200, content_type="text/plain", body="connected")

        await page.route(self.callback_prefix + "**", callback)
        await page.goto(url)
        if await page.title() == "Sign in · MemoryRouter":
            self.key_fields_seen += 1
            await page.get_by_label("Memory key").fill(self.key)
            await page.get_by_role("button", name="Continue").click()
            await page.wait_for_url("**/oauth/consent")
        assert (await page.title()).startswith(("Allow access?", "Allow more access?"))
        assert await page.locator("input[type=password]").count() == 0
        boxes = await page.locator("input[name=scope]").all()
        ticked = [await b.get_attribute("value") or "" for b in boxes if await b.is_checked()]
        self.ticked_by_default.append(ticked)
        new = await page.locator("li.new input[name=scope]").all()
        self.marked_new.append([await b.get_attribute("value") or "" for b in new])
        await page.get_by_role("button", name="Allow").click()
        await page.wait_for_url(self.callback_prefix + "**")
        await page.close()
        return {k: v[0] for k, v in parse_qs(urlsplit(self.landed[-1]).query).items()}


@asynccontextmanager
async def sdk_client(server: OAuthServer, person: Person) -> AsyncIterator[Client]:
    answers: list[dict[str, str]] = []

    async def redirect(url: str) -> None:
        answers.append(await person.connect(url))

    async def callback() -> AuthorizationCodeResult:
        last = answers[-1]
        return AuthorizationCodeResult(code=last["code"], state=last.get("state"), iss=last["iss"])

    provider = OAuthClientProvider(
        server_url=server.mcp_url,
        client_metadata=OAuthClientMetadata(
            client_name="Chromium flow",
            redirect_uris=[AnyUrl(REDIRECT_URI)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=MemoryStorage(),
        redirect_handler=redirect,
        callback_handler=callback,
    )
    async with (
        httpx2.AsyncClient(auth=provider, timeout=30) as http,
        Client(streamable_http_client(server.mcp_url, http_client=http)) as client,
    ):
        yield client


async def test_the_sdk_client_signs_in_once_for_ordinary_use_and_steps_up_with_consent_only(
    oauth_server: OAuthServer, chromium: Browser
) -> None:
    context = await chromium.new_context()
    person = Person(context, oauth_server.key, REDIRECT_URI.rsplit("/", 1)[0] + "/")
    try:
        async with sdk_client(oauth_server, person) as client:
            ok(await client.call_tool("store_memory", {"content": "asked for the key once"}))
            status = ok(await client.call_tool("memory_status", {}))
            assert status["granted_scopes"] == [
                "memories:read",
                "memories:reflect",
                "memories:write",
            ]
            ok(await client.call_tool("delete_memories", {"ids": ["nothing"]}))
            status = ok(await client.call_tool("memory_status", {}))
    finally:
        await context.close()
    assert person.key_fields_seen == 1  # the step-up showed the consent page only
    assert len(person.landed) == 2
    assert "memories:delete" in status["granted_scopes"]
    first, step_up = person.ticked_by_default
    assert first == ["memories:read", "memories:write", "memories:reflect"]
    assert sorted(step_up) == sorted([*first, "memories:delete"])  # what the app asked for
    assert person.marked_new == [[], ["memories:delete"]]  # and what it asks for anew


@pytest.fixture
def claude_code_document() -> Iterator[str]:
    """A client ID metadata document shaped like Claude Code's, on loopback; its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/oauth/claude-code-client-metadata"

    async def document(_: Request) -> JSONResponse:
        return JSONResponse(
            {
                "client_id": url,
                "client_name": "Claude Code",
                "redirect_uris": ["http://localhost/callback", "http://127.0.0.1/callback"],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            }
        )

    with serve(Starlette(routes=[StarletteRoute(urlsplit(url).path, document)]), sock):
        yield url


def fresh_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_a_claude_code_style_client_connects_with_a_loopback_redirect_on_a_fresh_port(
    oauth_server: OAuthServer, chromium: Browser, claude_code_document: str
) -> None:
    callback = f"http://127.0.0.1:{fresh_port()}/callback"
    verifier, challenge = pkce()
    params: dict[str, Any] = {
        "response_type": "code",
        "client_id": claude_code_document,
        "redirect_uri": callback,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "cc-state",
        "resource": oauth_server.mcp_url,
    }
    url = str(httpx2.URL(oauth_server.base + "/authorize", params=params))
    context = await chromium.new_context()
    person = Person(context, oauth_server.key, callback)
    try:
        answer = await person.connect(url)
    finally:
        await context.close()
    assert answer["state"] == "cc-state" and answer["iss"] == oauth_server.base
    tokens = httpx2.post(
        oauth_server.base + "/token",
        data={
            "grant_type": "authorization_code",
            "client_id": claude_code_document,
            "code": answer["code"],
            "code_verifier": verifier,
            "redirect_uri": callback,
            "resource": oauth_server.mcp_url,
        },
    )
    assert tokens.status_code == 200, tokens.text
    access = tokens.json()["access_token"]
    stored = call_mcp(oauth_server, access, "store_memory", content="from Claude Code")
    assert stored.status_code == 200 and not stored.json()["result"]["isError"]
