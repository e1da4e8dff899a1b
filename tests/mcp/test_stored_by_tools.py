"""What an MCP tool stores is the MCP surface's, of the client that called it: the SDK's own
client over a real uvicorn, embedded (the vault carried in process) and in front of a
separate vault (over HTTP), in both protocol eras; inspect_memory shows it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from tests.support.mcp import McpServer, Mode, ok

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> Mode:
    value: Mode = request.param
    return value


@asynccontextmanager
async def named_client(server: McpServer, mode: Mode, name: str) -> AsyncIterator[Client]:
    """The SDK's client, introducing itself as ``name`` (``clientInfo``)."""
    headers = {"Authorization": f"Bearer {server.key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(
            streamable_http_client(server.url, http_client=http),
            mode=mode,
            client_info=Implementation(name=name, version="1.0"),
        ) as client,
    ):
        yield client


async def test_store_memory_records_the_mcp_surface_the_client_and_the_key(
    mcp_server: McpServer, mode: Mode
) -> None:
    async with named_client(mcp_server, mode, "Desk Assistant ☕") as client:
        stored = ok(
            await client.call_tool("store_memory", {"content": "The plants need water on Fridays."})
        )
        (memory_id,) = stored["ids"]
        shown = ok(await client.call_tool("inspect_memory", {"memory_id": memory_id}))
    by = shown["stored_by"]
    # a stateless 2025 call carries no clientInfo, and a memory key no OAuth client
    named = "Desk Assistant ☕" if mode == "auto" else None
    assert (by["surface"], by.get("client")) == ("mcp", named)
    assert by["key_id"].startswith("key_") and mcp_server.key not in str(shown)


async def test_store_memory_compares_nothing_by_default(mcp_server: McpServer) -> None:
    async with named_client(mcp_server, "auto", "Desk Assistant") as client:
        ok(await client.call_tool("store_memory", {"content": "Ana lives in Porto."}))
        again = ok(
            await client.call_tool(
                "store_memory", {"content": "ana lives in  porto.", "date": "2026-03-01"}
            )
        )
    # the check is dedupe "near"'s (below): a default write answers before any comparison
    assert again["stored"] == 1 and "similar" not in again


async def test_store_memory_with_dedupe_near_does_not_store_a_repeat(
    mcp_server: McpServer,
) -> None:
    async with named_client(mcp_server, "auto", "Desk Assistant") as client:
        first = ok(await client.call_tool("store_memory", {"content": "Ana lives in Porto."}))
        again = ok(
            await client.call_tool(
                "store_memory",
                {"content": "Ana lives in Porto.", "date": "2026-03-01", "dedupe": "near"},
            )
        )
    assert (again["stored"], again["ids"]) == (0, first["ids"])
    assert again["skipped"] == [{"index": 0, "id": first["ids"][0], "score": 1.0}]
