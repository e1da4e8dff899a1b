"""Refusals a user can act on: scopes that match what the key may do (as REST decides), tool
errors that name the failure, and what store_memory reports back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp.client import Client

from mcp_memoryrouter.auth.scopes import load_policy
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.mcp_server.binding import Binder
from mcp_memoryrouter.mcp_server.budget import ResultBudget
from mcp_memoryrouter.mcp_server.server import build_server
from tests.support import Vault
from tests.support.mcp import McpServer, call, post, rpc, text_of

pytestmark = pytest.mark.anyio
KEY = "mk_" + "k" * 43


@pytest.mark.parametrize(
    ("suffix", "tool", "arguments", "scope"),
    [
        (":write", "search_memories", {"query": "x"}, "memories:read"),
        (":write", "store_memory", {"content": "x"}, "memories:write"),
        (":write", "delete_memories", {"ids": ["x"]}, "memories:delete"),
        (":read", "consolidate_memories", {}, "memories:reflect"),
    ],
)
def test_a_key_is_refused_before_dispatch_exactly_where_rest_answers_403(
    embedded: McpServer, suffix: str, tool: str, arguments: dict[str, object], scope: str
) -> None:
    """A memory key cannot step up, so MCP refuses it with a tool error, not a challenge."""
    key = embedded.new_key(read_only=True) + suffix
    rest = embedded.url.removesuffix("/mcp")
    paths = {
        "search_memories": ("/v1/memory/search", {"query": "x"}),
        "store_memory": ("/v1/memory/ingest", {"messages": [{"content": "x"}]}),
        "delete_memories": ("/v1/memory/delete-ids", {"ids": ["x"]}),
        "consolidate_memories": ("/v1/memory/consolidate/checkout", {"tier": 1}),
    }
    path, body = paths[tool]
    by_rest = httpx2.post(rest + path, json=body, headers={"Authorization": f"Bearer {key}"})
    assert by_rest.status_code == 403
    response = post(embedded, call(tool, arguments), key=key)
    assert response.status_code == 200 and "www-authenticate" not in response.headers
    assert key.split(":")[0] not in response.text  # names the vault, never the key
    result = response.json()["result"]
    assert result["isError"] and result["content"][0]["text"].partition(": ")[2].startswith(
        "insufficient_scope: "
    )
    assert load_policy().for_tool(tool) == scope


def test_a_read_only_key_in_write_mode_may_still_list_the_tools(embedded: McpServer) -> None:
    key = embedded.new_key(read_only=True) + ":write"
    listed = post(embedded, rpc("tools/list"), key=key)
    assert listed.status_code == 200 and listed.json()["result"]["tools"] == []  # it may call none


@asynccontextmanager
async def tools_over(transport: httpx2.AsyncBaseTransport) -> AsyncIterator[Client]:
    vault = VaultClient("http://vault.internal", transport=transport)
    server = build_server(Binder(vault, load_policy(), ResultBudget(10_000), KEY))
    try:
        async with Client(server) as client:
            yield client
    finally:
        await vault.aclose()


async def test_a_vault_that_cannot_be_reached_is_a_tool_error_naming_the_failure() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    async with tools_over(httpx2.MockTransport(refuse)) as client:
        result = await client.call_tool("search_memories", {"query": "anything"})
    assert result.is_error
    assert "transport_failure" in text_of(result) and "ConnectError" in text_of(result)


async def test_a_vault_answering_garbage_is_a_tool_error_naming_the_exception_class() -> None:
    def garbage(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/v1/keys/current":
            return httpx2.Response(200, json={"vault": "vr_1", "read_only": False, "mode": "full"})
        return httpx2.Response(200, text="<html>a proxy error page</html>")

    async with tools_over(httpx2.MockTransport(garbage)) as client:
        result = await client.call_tool("memory_status", {})
        shaped = await client.call_tool("search_memories", {"query": "x"})
    assert result.is_error and "JSONDecodeError" in text_of(result)
    assert shaped.is_error and "JSONDecodeError" in text_of(shaped)


async def test_a_vault_answering_the_wrong_shape_is_not_blamed_on_the_arguments() -> None:
    def wrong(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/v1/keys/current":
            return httpx2.Response(200, json={"vault": "vr_1", "read_only": False, "mode": "full"})
        return httpx2.Response(200, json={"unexpected": True})

    async with tools_over(httpx2.MockTransport(wrong)) as client:
        result = await client.call_tool("search_memories", {"query": "x"})
    assert result.is_error
    assert "invalid_request" not in text_of(result) and "SearchResponse" in text_of(result)


async def test_store_memory_returns_the_ids_it_stored_and_found_as_duplicates(
    vault: Vault,
) -> None:
    transport = httpx2.ASGITransport(app=vault.app)
    client = VaultClient("http://vault.internal", transport=transport)
    server = build_server(Binder(client, load_policy(), ResultBudget(10_000), vault.key))
    try:
        async with Client(server) as mcp:
            first = await mcp.call_tool("store_memory", {"content": "We chose Postgres."})
            again = await mcp.call_tool("store_memory", {"content": "We chose Postgres."})
            found = await mcp.call_tool("fetch", {"id": first.structured_content["ids"][0]})
    finally:
        await client.aclose()
    assert first.structured_content is not None and again.structured_content is not None
    assert first.structured_content["stored"] == 1 and len(first.structured_content["ids"]) == 1
    assert again.structured_content["duplicates"] == 1
    assert again.structured_content["ids"] == first.structured_content["ids"]
    assert found.structured_content is not None
    assert found.structured_content["text"] == "We chose Postgres."


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("search_memories", {"query": "x", "tiers": []}),
        ("search_memories", {"query": "x", "tiers": [], "from_date": "2026-01-01"}),
        ("date_search_memories", {"from_date": "2026-01-01", "tiers": []}),
        ("search_memories", {"query": "x", "tiers": [4]}),
        ("delete_memories", {"ids": ["x" * 201]}),
        ("commit_reflections", {"batch_id": "cb_1", "entries": []}),
    ],
)
async def test_an_argument_rest_refuses_is_refused_by_the_tool_on_every_branch(
    vault: Vault, tool: str, arguments: dict[str, object]
) -> None:
    """One field type per rule: ``tiers=[]`` used to drop the filter on one branch of
    search_memories and fail on the other."""
    transport = httpx2.ASGITransport(app=vault.app)
    client = VaultClient("http://vault.internal", transport=transport)
    server = build_server(Binder(client, load_policy(), ResultBudget(10_000), vault.key))
    try:
        async with Client(server) as mcp:
            await mcp.call_tool("store_memory", {"content": "We chose Postgres."})
            result = await mcp.call_tool(tool, arguments)
    finally:
        await client.aclose()
    assert result.is_error and result.structured_content is None, text_of(result)
    assert "validation error" in text_of(result).lower(), text_of(result)
