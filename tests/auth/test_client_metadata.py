"""Client ID metadata documents: the client_id is the URL of a JSON document describing the
client, served here on loopback (a loopback authorization server accepts http documents)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_memoryrouter.auth.server.clients import MetadataDocuments
from tests.support.loopback import Slot, borrowed
from tests.support.oauth import (
    REDIRECT_URI,
    Browser,
    OAuthServer,
    authorize_url,
    call_mcp,
    exchange,
    pkce,
)

pytestmark = pytest.mark.anyio
USERINFO_REDIRECT = "http://claude.ai@127.0.0.1:7777/callback"
FRAGMENT_REDIRECT = "http://127.0.0.1:7777/callback#"


@pytest.fixture
def documents() -> Iterator[str]:
    """A loopback site serving /good.json, /mismatch.json, /elsewhere.json, /userinfo.json
    and /fragment.json; its base URL."""
    with borrowed() as slot:
        yield from _documents(slot)


def _documents(slot: Slot) -> Iterator[str]:
    base = slot.url

    def document(name: str, **changes: Any) -> Route:
        async def serve_document(_: Request) -> JSONResponse:
            return JSONResponse(
                {
                    "client_id": f"{base}/{name}.json",
                    "client_name": "Metadata document client",
                    "redirect_uris": [REDIRECT_URI],
                    "token_endpoint_auth_method": "none",
                    **changes,
                }
            )

        return Route(f"/{name}.json", serve_document)

    app = Starlette(
        routes=[
            document("good"),
            document("mismatch", client_id="https://someone.example/else.json"),
            document("elsewhere", redirect_uris=["http://127.0.0.1:7777/elsewhere"]),
            document("userinfo", redirect_uris=[USERINFO_REDIRECT]),
            document("fragment", redirect_uris=[FRAGMENT_REDIRECT]),
        ]
    )
    with slot.serving(app, lifespan="on"):
        yield base


async def test_a_metadata_document_client_completes_the_flow(
    oauth_server: OAuthServer, documents: str
) -> None:
    client_id = f"{documents}/good.json"
    verifier, challenge = pkce()
    browser = Browser(oauth_server.key)
    try:
        callback = await browser.authorize(authorize_url(oauth_server, client_id, challenge))
    finally:
        await browser.aclose()
    tokens = exchange(oauth_server, client_id, callback["code"], verifier)
    assert tokens.status_code == 200, tokens.text
    response = call_mcp(oauth_server, tokens.json()["access_token"], "memory_status")
    assert response.status_code == 200


@pytest.mark.parametrize("name", ["mismatch", "elsewhere", "missing"])
def test_a_document_that_does_not_describe_its_own_url_or_redirect_is_refused(
    oauth_server: OAuthServer, documents: str, name: str
) -> None:
    _, challenge = pkce()
    response = httpx2.get(authorize_url(oauth_server, f"{documents}/{name}.json", challenge))
    assert response.status_code == 400 and "location" not in response.headers


@pytest.mark.parametrize(
    ("url", "accepted"),
    [
        ("https://claude.ai/oauth/mcp-oauth-client-metadata", True),
        ("http://127.0.0.1:9/client.json", False),
        ("https://127.0.0.1/client.json", False),
        ("https://10.0.0.8/client.json", False),
        ("https://localhost/client.json", False),
        ("https://claude.ai/", False),
        ("https://user@claude.ai/client.json", False),
    ],
)
async def test_a_public_server_fetches_only_https_documents_off_the_local_network(
    url: str, accepted: bool
) -> None:
    async with httpx2.AsyncClient() as http:
        assert MetadataDocuments(http, allow_loopback=False).acceptable(url) is accepted


@pytest.mark.parametrize(
    ("name", "redirect"), [("userinfo", USERINFO_REDIRECT), ("fragment", FRAGMENT_REDIRECT)]
)
def test_a_document_whose_redirect_has_user_info_or_a_fragment_is_refused(
    oauth_server: OAuthServer, documents: str, name: str, redirect: str
) -> None:
    _, challenge = pkce()
    url = authorize_url(oauth_server, f"{documents}/{name}.json", challenge, redirect_uri=redirect)
    response = httpx2.get(url)
    assert response.status_code == 400 and "location" not in response.headers
