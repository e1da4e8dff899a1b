"""search_memories carries as_of to the vault: a question that names a time counts from the
moment the host says it is asked."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from mcp.client import Client

from mcp_memoryrouter.auth.scopes import load_policy
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.mcp_server.binding import Binder
from mcp_memoryrouter.mcp_server.budget import ResultBudget
from mcp_memoryrouter.mcp_server.server import build_server
from tests.support import make_vault
from tests.support.mcp import text_of

pytestmark = pytest.mark.anyio


async def test_search_memories_ranks_by_the_time_named_from_as_of(tmp_path: Path) -> None:
    vault = make_vault(tmp_path)
    vault.ingest("I cooked risotto.", date="2025-05-12T19:00:00Z", session_id="a")
    vault.ingest("I cooked tagine at home.", date="2026-05-09T19:00:00Z", session_id="b")
    vault.ingest("Cooked soup again.", date="2026-02-03T19:00:00Z", session_id="c")
    client = VaultClient("http://vault.internal", transport=httpx2.ASGITransport(app=vault.app))
    server = build_server(Binder(client, load_policy(), ResultBudget(10_000), vault.key))
    question = {"query": "what did I cook last month?", "limit": 3}
    try:
        async with Client(server) as mcp:
            may = await mcp.call_tool("search_memories", {**question, "as_of": "2026-06-15"})
            year_before = await mcp.call_tool(
                "search_memories", {**question, "as_of": "2025-06-15"}
            )
            bad = await mcp.call_tool("search_memories", {**question, "as_of": "last tuesday"})
    finally:
        await client.aclose()
        vault.http.close()
        vault.store.close()
    assert may.structured_content is not None and year_before.structured_content is not None
    assert may.structured_content["memories"][0]["content"] == "I cooked tagine at home."
    assert year_before.structured_content["memories"][0]["content"] == "I cooked risotto."
    assert bad.is_error and "as_of" in text_of(bad), text_of(bad)
