"""search_memories through the SDK's own client keeps the relevance floor: the memories a query
matches, not a page filled with the rest down to a 0.0 score (the real local model)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.config import Settings
from tests.support import live_server
from tests.support.mcp import McpServer, ok
from tests.support.store import GUITAR, UNRELATED

pytestmark = pytest.mark.anyio


@pytest.fixture
def local(tmp_path: Path) -> Iterator[McpServer]:
    settings = Settings(data_dir=tmp_path, embeddings="local", rate_limit_per_minute=0)
    server = create_server(settings)
    assert server.service is not None
    key, _ = server.service.create_vault()
    with live_server(server.app, lifespan="on") as url:
        for texts in (UNRELATED[:8], UNRELATED[8:] + GUITAR):
            body = {"messages": [{"content": t, "date": "2026-02-01T10:00:00Z"} for t in texts]}
            stored = httpx2.post(
                url + "/v1/memory/ingest", json=body, headers={"X-Memory-Key": key}, timeout=30
            )
            assert stored.status_code == 202, stored.text
        yield McpServer(url + "/mcp", key, server.service)


async def test_search_memories_returns_the_four_matches_and_no_zero_tail(local: McpServer) -> None:
    async with local.client() as client:
        found = ok(await client.call_tool("search_memories", {"query": "guitar", "limit": 20}))
        nothing = ok(await client.call_tool("search_memories", {"query": "quantum chromodynamics"}))
    assert sorted(m["content"] for m in found["memories"]) == sorted(GUITAR)
    assert all(m["score"] > 0 for m in found["memories"])
    assert nothing["memories"] == []
