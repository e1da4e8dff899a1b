"""A memory key cannot step up: over MCP it is listed only what it may use, and a call it may
not make is a tool error saying what the key is and how to get one that may. An OAuth grant
is listed everything and steps up (HTTP 403 ``insufficient_scope``) when a call needs more.
Each through the SDK's own client, over a real server on loopback (and stdio)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_REQUEST, CallToolResult

from tests.support.mcp import McpServer, stdio_server
from tests.support.oauth import OAuthServer, grant_tokens

pytestmark = pytest.mark.anyio

READS = {"search_memories", "date_search_memories", "inspect_memory", "memory_status"}
READS |= {"search", "fetch", "memory_view_abilities"}
WRITES = {"store_memory", "delete_memories", "forget_all_memories"}
EVERY = READS | WRITES | {"consolidate_memories", "commit_reflections", "reflect_memories"}
RESOURCES = {"memory://vault/stats", "memory://vault/recent"}
RESOURCES |= {"ui://memoryrouter/search.html", "ui://memoryrouter/memory.html"}


def error_code(result: CallToolResult) -> str:
    """The code a tool error starts with (after the SDK's "Error executing tool …: ")."""
    text = "".join(getattr(c, "text", "") for c in result.content)
    return text.partition(": ")[2].partition(":")[0]


def text_of(result: CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def listed(client: Client) -> tuple[set[str], set[str]]:
    tools = {t.name for t in (await client.list_tools()).tools}
    resources = {str(r.uri) for r in (await client.list_resources()).resources}
    return tools, resources


@pytest.mark.parametrize(
    ("how", "tools", "resources"),
    [
        ("read-write key", EVERY, RESOURCES),
        ("read-only key", READS, RESOURCES),
        (":read", READS, RESOURCES),
        (":write", WRITES, set()),
        (":off", set(), set()),
        ("read-only key with :write", set(), set()),
    ],
)
async def test_a_memory_key_is_listed_only_the_tools_and_resources_it_may_use(
    embedded: McpServer, how: str, tools: set[str], resources: set[str]
) -> None:
    key = {
        "read-write key": embedded.key,
        "read-only key": embedded.new_key(read_only=True),
        ":read": embedded.key + ":read",
        ":write": embedded.key + ":write",
        ":off": embedded.key + ":off",
        "read-only key with :write": embedded.new_key(read_only=True) + ":write",
    }[how]
    async with embedded.client(key) as client:
        assert await listed(client) == (tools, resources)


async def test_a_read_only_key_sees_the_read_tools_through_a_separate_vault_too(
    proxy: McpServer,
) -> None:
    async with proxy.client(proxy.new_key(read_only=True)) as client:
        assert await listed(client) == (READS, RESOURCES)


async def test_a_write_tool_called_with_a_read_only_key_says_how_to_get_a_read_write_key(
    embedded: McpServer,
) -> None:
    statuses: list[int] = []

    async def seen(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    key = embedded.new_key(read_only=True)
    async with embedded.client(key, hooks=[seen]) as client:
        status = await client.call_tool("memory_status", {})
        assert isinstance(status.structured_content, dict)
        vault = status.structured_content["vault"]
        refused = await client.call_tool("store_memory", {"content": "Not with this key."})
        deleted = await client.call_tool("forget_all_memories", {"confirmation": "x"})
        after = await client.call_tool("memory_status", {})
    assert refused.is_error and error_code(refused) == "insufficient_scope"
    assert f"keys create --vault {vault}" in text_of(refused)  # a command that makes one
    assert key not in text_of(refused)
    assert deleted.is_error and error_code(deleted) == "insufficient_scope"
    assert set(statuses) <= {200, 202}  # no 403: there is nothing to step up to
    assert isinstance(after.structured_content, dict)
    assert after.structured_content["total_memories"] == 0


async def test_a_read_with_a_key_in_write_mode_says_to_drop_the_suffix(
    embedded: McpServer,
) -> None:
    async with embedded.client(embedded.key + ":write") as client:
        refused = await client.call_tool("search_memories", {"query": "anything"})
        with pytest.raises(MCPError) as unread:
            await client.read_resource("memory://vault/stats")
    assert refused.is_error and error_code(refused) == "insufficient_scope"
    assert ":write" in text_of(refused)
    assert unread.value.error.code == INVALID_REQUEST
    assert ":write" in unread.value.error.message


@asynccontextmanager
async def oauth_client(
    server: OAuthServer, token: str, statuses: list[httpx2.Response]
) -> AsyncIterator[Client]:
    async def seen(response: httpx2.Response) -> None:
        statuses.append(response)

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30, event_hooks={"response": [seen]}) as http,
        Client(streamable_http_client(server.mcp_url, http_client=http)) as client,
    ):
        yield client


async def test_an_oauth_token_without_the_scope_is_listed_everything_and_stepped_up(
    oauth_server: OAuthServer,
) -> None:
    _, tokens = await grant_tokens(oauth_server, scope="memories:read")
    responses: list[httpx2.Response] = []
    async with oauth_client(oauth_server, tokens["access_token"], responses) as client:
        assert await listed(client) == (EVERY, RESOURCES)  # the rest comes by step-up
    with pytest.raises(Exception):  # noqa: B017, PT011 (the SDK client's own error for a 403)
        async with oauth_client(oauth_server, tokens["access_token"], responses) as client:
            await client.call_tool("delete_memories", {"ids": ["x"]})
    [refused] = [r for r in responses if r.status_code == 403]
    challenge = refused.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and 'scope="memories:delete"' in challenge
    assert "resource_metadata=" in challenge


async def test_stdio_with_a_read_only_key_lists_the_read_tools_and_refuses_a_write(
    tmp_path: Path,
) -> None:
    params, key = stdio_server(tmp_path)
    params.env = {**(params.env or {}), "MEMORYROUTER_KEY": key + ":read"}
    async with Client(params) as client:
        assert await listed(client) == (READS, RESOURCES)
        refused = await client.call_tool("store_memory", {"content": "Not with :read."})
    assert refused.is_error and error_code(refused) == "insufficient_scope"
    assert ":read" in text_of(refused)
