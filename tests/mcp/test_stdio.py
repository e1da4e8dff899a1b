"""``mcp-memoryrouter stdio`` as a local client starts it."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.client import Client

from tests.mcp.conftest import stdio_server

pytestmark = pytest.mark.anyio


async def test_stdio_serves_the_tools_with_the_key_from_the_environment(tmp_path: Path) -> None:
    params, key = stdio_server(tmp_path)
    async with Client(params) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert "search_memories" in tools
        stored = await client.call_tool("store_memory", {"content": "from claude desktop"})
        assert not stored.is_error
        status = await client.call_tool("memory_status", {})
        assert status.structured_content is not None
        assert status.structured_content["total_memories"] == 1
        assert key not in str(status.structured_content)
