"""A ChatGPT-shaped connection, end to end, with a client ID metadata document (CIMD: the way
in the 2026-07-28 specification prefers to dynamic registration): the MCP SDK's client
identifies itself as ``https://chatgpt.com/oauth/<id>/client.json`` and never registers; the
server fetches that document from a local double of chatgpt.com (its resolver names a public
address, its HTTP client reaches the double, nothing leaves this machine), and the person
signs in, allows, the token is issued and a tool call succeeds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from mcp.client import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from pydantic import AnyUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_memoryrouter.auth.server.clients import DocumentFetching
from tests.support.mcp import ok
from tests.support.oauth import Browser, MemoryStorage, OAuthServer, oauth_server_at

pytestmark = pytest.mark.anyio
CLIENT_ID = "https://chatgpt.com/oauth/app_6f1d2c3b4a59/client.json"
CALLBACK = "https://chatgpt.com/connector/oauth/conn_8c7b6a5d4e3f"
PUBLIC = "104.18.32.47"  # where the double's resolver says chatgpt.com is: a public address


class ChatGptSite:
    """The double of chatgpt.com: serves ChatGPT's client document, records who asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []  # (Host, path) of each request
        self.app = Starlette(routes=[Route("/oauth/{app}/client.json", self.document)])

    async def document(self, request: Request) -> JSONResponse:
        self.asked.append((request.headers["host"], request.url.path))
        return JSONResponse(
            {
                "client_id": CLIENT_ID,
                "client_name": "ChatGPT",
                "client_uri": "https://chatgpt.com",
                "redirect_uris": [CALLBACK],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            }
        )


@pytest.fixture
def chatgpt() -> ChatGptSite:
    return ChatGptSite()


@pytest.fixture
async def server(tmp_path: Path, chatgpt: ChatGptSite) -> AsyncIterator[OAuthServer]:
    async def resolve(host: str, port: int) -> list[str]:
        assert host == "chatgpt.com"  # the only host this test lets the server look up
        return [PUBLIC]

    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=chatgpt.app))
    with oauth_server_at(tmp_path, documents=DocumentFetching(http, resolve)) as running:
        yield running


async def test_a_chatgpt_shaped_client_id_document_connects_end_to_end(
    server: OAuthServer, chatgpt: ChatGptSite
) -> None:
    browser = Browser(server.key)
    answers: list[dict[str, str]] = []

    async def redirect(url: str) -> None:  # the person's browser, sent to /authorize
        location = await browser.authorize_to(url)
        assert location.startswith(CALLBACK + "?")  # back to ChatGPT's connector callback
        answers.append({k: v[0] for k, v in parse_qs(urlsplit(location).query).items()})

    async def callback() -> AuthorizationCodeResult:
        last = answers[-1]
        return AuthorizationCodeResult(code=last["code"], state=last["state"], iss=last["iss"])

    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=server.mcp_url,
        client_metadata=OAuthClientMetadata(
            client_name="ChatGPT",
            redirect_uris=[AnyUrl(CALLBACK)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect,
        callback_handler=callback,
        client_metadata_url=CLIENT_ID,
    )
    try:
        async with (
            httpx2.AsyncClient(auth=provider, timeout=30) as http,
            Client(streamable_http_client(server.mcp_url, http_client=http)) as client,
        ):
            ok(await client.call_tool("store_memory", {"content": "stored from ChatGPT"}))
            status = ok(await client.call_tool("memory_status", {}))
    finally:
        await browser.aclose()
    assert storage.client is not None and storage.client.client_id == CLIENT_ID  # no /register
    assert status["vault"] == server.vault_of(server.key)
    assert chatgpt.asked == [("chatgpt.com", "/oauth/app_6f1d2c3b4a59/client.json")]
    [consent] = browser.consents
    assert "An app calling itself <strong>&ldquo;<bdi>ChatGPT</bdi>&rdquo;</strong>" in consent
    assert f"<code><bdi>{CLIENT_ID}</bdi></code>" in consent
    assert answers[0]["iss"] == server.base
