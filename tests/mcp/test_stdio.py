"""``mcp-memoryrouter stdio`` as a local client starts it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from mcp.client import Client

from mcp_memoryrouter.startup import SERVING_FILE
from tests.support import free_port
from tests.support.mcp import stdio_server
from tests.support.process import _stop, _wait_healthy

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


async def test_stdio_on_a_directory_a_running_serve_owns_goes_through_that_server(
    tmp_path: Path,
) -> None:
    """What the README's install step leaves: `serve` running, then Claude Code or Claude
    desktop starts `stdio` on the same data directory. It attaches to the running server
    (the URL `serve` announced) instead of failing."""
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    params, key = stdio_server(data_dir)
    port = free_port()
    env = {**os.environ, "MEMORYROUTER_DATA_DIR": str(data_dir), "MEMORYROUTER_EMBEDDINGS": "none"}
    serving = subprocess.Popen(
        [sys.executable, "-m", "mcp_memoryrouter", "serve", "--port", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_healthy(port)
        announced = json.loads((data_dir / SERVING_FILE).read_text())
        assert announced == {"pid": serving.pid, "url": f"http://127.0.0.1:{port}"}
        async with Client(params) as client:
            stored = await client.call_tool("store_memory", {"content": "stored through serve"})
            assert not stored.is_error, stored
        found = httpx2.post(
            f"http://127.0.0.1:{port}/v1/memory/search",
            json={"query": "stored through serve"},
            headers={"X-Memory-Key": key},
            timeout=30,
        )
        assert [m["content"] for m in found.json()["memories"]] == ["stored through serve"]
    finally:
        _stop(serving)
