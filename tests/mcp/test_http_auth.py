"""The /mcp endpoint over raw HTTP: 401 and 403 challenges, hosts, CORS, the no-auth mode."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.errors import ConfigError
from tests.support import live_server
from tests.support.mcp import McpServer, Mode, call, post, rpc


def test_no_token_is_401_with_a_bearer_challenge(embedded: McpServer) -> None:
    response = post(embedded, rpc("tools/list"))
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert 'scope="memories:read memories:write memories:reflect"' in challenge


def test_an_unknown_key_is_401_invalid_token(embedded: McpServer) -> None:
    response = post(embedded, rpc("tools/list"), key="mk_" + "x" * 43)
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def refused_as_a_tool_error(response: httpx2.Response) -> bool:
    """A memory key's refusal: HTTP 200, an ``isError`` result with the code, no challenge."""
    result = response.json()["result"]
    return (
        response.status_code == 200
        and "www-authenticate" not in response.headers
        and result["isError"]
        and result["content"][0]["text"].partition(": ")[2].startswith("insufficient_scope: ")
    )


def test_a_read_only_key_is_refused_before_dispatch_with_a_tool_error(
    embedded: McpServer,
) -> None:
    embedded_key = embedded.new_key(read_only=True)
    listed = post(embedded, rpc("tools/list"), key=embedded_key)
    assert listed.status_code == 200
    assert len(listed.json()["result"]["tools"]) == 7  # the read tools, all it may call
    for tool in ["delete_memories", "store_memory", "consolidate_memories"]:
        response = post(embedded, call(tool, {"ids": ["x"], "content": "x"}), key=embedded_key)
        assert refused_as_a_tool_error(response), response.text
    allowed = post(embedded, call("search_memories", {"query": "x"}), key=embedded_key)
    assert allowed.status_code == 200 and not allowed.json()["result"]["isError"]


def test_key_mode_suffixes_narrow_the_granted_scopes(embedded: McpServer) -> None:
    read = post(embedded, call("store_memory", {"content": "x"}), key=embedded.key + ":read")
    assert refused_as_a_tool_error(read)
    write = post(embedded, call("search_memories", {"query": "x"}), key=embedded.key + ":write")
    assert refused_as_a_tool_error(write)
    stored = post(embedded, call("store_memory", {"content": "x"}), key=embedded.key + ":write")
    assert stored.status_code == 200 and not stored.json()["result"]["isError"]


def test_resource_reads_need_their_scope(embedded: McpServer) -> None:
    body = rpc("resources/read", {"uri": "memory://vault/stats"})
    refused = post(embedded, body, key=embedded.key + ":write")
    assert refused.status_code == 200 and refused.json()["error"]["code"] == -32600
    assert post(embedded, body, key=embedded.key).status_code == 200


def test_foreign_host_headers_are_refused(embedded: McpServer) -> None:
    response = post(embedded, rpc("tools/list"), key=embedded.key, Host="evil.example")
    assert response.status_code == 421


def test_cors_preflight_allows_the_inspector_and_exposes_www_authenticate(
    embedded: McpServer,
) -> None:
    response = httpx2.options(
        embedded.url,
        headers={
            "Origin": "http://localhost:6274",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type,mcp-protocol-version",
        },
    )
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "http://localhost:6274"
    refused = post(embedded, rpc("tools/list"), key=embedded.key, Origin="http://localhost:6274")
    assert "WWW-Authenticate" in refused.headers["access-control-expose-headers"]


def test_auth_none_serves_one_vault_without_a_token(tmp_path: Path) -> None:
    server = create_server(Settings(data_dir=tmp_path, auth="none", embeddings="none"))
    with live_server(server.app, lifespan="on") as url:
        target = McpServer(url + "/mcp", "", server.service)  # type: ignore[arg-type]
        stored = post(target, call("store_memory", {"content": "local note"}))
        assert stored.status_code == 200 and not stored.json()["result"]["isError"]
    assert (tmp_path / "local.key").stat().st_mode & 0o777 == 0o600
    again = create_server(Settings(data_dir=tmp_path, auth="none", embeddings="none"))
    with live_server(again.app, lifespan="on") as url:
        found = post(
            McpServer(url + "/mcp", "", again.service),  # type: ignore[arg-type]
            call("search_memories", {"query": "local"}),
        )
        assert found.json()["result"]["structuredContent"]["memories"][0]["content"] == "local note"


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.com"])
def test_auth_none_refuses_to_bind_beyond_loopback(tmp_path: Path, host: str) -> None:
    with pytest.raises(ConfigError):
        create_server(Settings(data_dir=tmp_path, auth="none", host=host))


def test_the_host_allow_list_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYROUTER_ALLOWED_HOSTS", '["memory.example.com"]')
    monkeypatch.setenv("MEMORYROUTER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MEMORYROUTER_EMBEDDINGS", "none")
    server = create_server(Settings())
    key, _ = server.service.create_vault()  # type: ignore[union-attr]
    with live_server(server.app, lifespan="on") as url:
        target = McpServer(url + "/mcp", key, server.service)  # type: ignore[arg-type]
        assert (
            post(target, rpc("tools/list"), key=key, Host="memory.example.com").status_code == 200
        )
        assert post(target, rpc("tools/list"), key=key, Host="other.example").status_code == 421


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_refused_call_never_reaches_the_vault_in_either_protocol_era(
    embedded: McpServer, mode: Mode
) -> None:
    """The scope decision is taken where the call is bound to its vault, before the tool's
    body: a memory key is answered a tool error, and the memory is still there."""
    async with embedded.client(mode=mode) as client:
        stored = await client.call_tool("store_memory", {"content": "Keep this one."})
        assert isinstance(stored.structured_content, dict)
        [memory_id] = stored.structured_content["ids"]
    statuses: list[int] = []

    async def seen(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    async with embedded.client(embedded.key + ":read", mode, hooks=[seen]) as reader:
        refused = await reader.call_tool("delete_memories", {"ids": [memory_id]})
    assert refused.is_error and 403 not in statuses
    async with embedded.client(mode=mode) as client:
        found = await client.call_tool("inspect_memory", {"memory_id": memory_id})
        assert not found.is_error and "Keep this one." in str(found.structured_content)
