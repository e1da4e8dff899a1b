"""A revoked memory key stops at once on /mcp too: the endpoint asks the vault about the key
on every request instead of trusting an answer it cached a moment ago."""

from __future__ import annotations

import httpx2

from tests.support.mcp import McpServer

LEGACY = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def _mcp(server: McpServer, key: str) -> httpx2.Response:
    headers = {**LEGACY, "Authorization": f"Bearer {key}"}
    return httpx2.post(server.url, json=LIST, headers=headers, timeout=30)


def test_a_memory_key_revoked_over_rest_is_refused_on_its_next_mcp_request(
    embedded: McpServer,
) -> None:
    rest = embedded.url.removesuffix("/mcp")
    auth = {"Authorization": f"Bearer {embedded.key}"}
    second = httpx2.post(rest + "/v1/keys", json={"name": "laptop"}, headers=auth, timeout=30)
    assert second.status_code == 201
    doomed = second.json()["key"]
    assert _mcp(embedded, doomed).status_code == 200  # known, and fresh in any cache
    key_id = second.json()["id"]
    assert httpx2.delete(f"{rest}/v1/keys/{key_id}", headers=auth, timeout=30).status_code in (
        200,
        204,
    )
    refused = _mcp(embedded, doomed)
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    assert _mcp(embedded, embedded.key).status_code == 200  # the vault's other key still works
