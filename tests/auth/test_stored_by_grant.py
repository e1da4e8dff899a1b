"""A memory an OAuth-connected app stores over MCP records the MCP surface, the memory key
the grant is bound to and, when the call names no client itself (a stateless 2025 call), the
client id of the app's grant: the embedded authorization server on a real uvicorn."""

from __future__ import annotations

import httpx2
import pytest

from tests.support.oauth import OAuthServer, call_mcp, grant_tokens

pytestmark = pytest.mark.anyio


async def test_a_granted_apps_memory_names_its_client_id(oauth_server: OAuthServer) -> None:
    client_id, tokens = await grant_tokens(oauth_server)
    stored = call_mcp(oauth_server, tokens["access_token"], "store_memory", content="granted")
    assert stored.status_code == 200, stored.text
    (memory_id,) = stored.json()["result"]["structuredContent"]["ids"]
    headers = {"Authorization": f"Bearer {oauth_server.key}"}
    shown = httpx2.post(
        oauth_server.base + "/v1/memory/inspect",
        json={"memory_id": memory_id},
        headers=headers,
        timeout=30,
    ).json()
    keys = httpx2.get(oauth_server.base + "/v1/keys", headers=headers, timeout=30).json()["keys"]
    by = shown["stored_by"]
    assert (by["surface"], by["client"]) == ("mcp", client_id[:100])
    assert by["key_id"] in {k["id"] for k in keys}
