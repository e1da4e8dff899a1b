"""date_search_memories pages cut to the result budget still visit every row exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client import Client

from mcp_memoryrouter.auth.scopes import load_policy
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.mcp_server.binding import Binder
from mcp_memoryrouter.mcp_server.budget import ResultBudget
from mcp_memoryrouter.mcp_server.server import build_server
from tests.support import make_vault

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("order", ["newest_first", "oldest_first"])
async def test_pages_cut_between_rows_continue_with_the_first_row_left_out(
    tmp_path: Path, order: str
) -> None:
    vault = make_vault(tmp_path)
    for minute in range(30):
        text = f"Standup note {minute}: " + "the team reviewed the queue and the cache " * 41
        vault.ingest(text, date=f"2026-05-04T09:{minute:02d}:00Z")
    client = VaultClient("http://vault.internal", transport=httpx2.ASGITransport(app=vault.app))
    server = build_server(Binder(client, load_policy(), ResultBudget(2_000), vault.key))
    window: dict[str, Any] = {"from_date": "2026-05-04", "to_date": "2026-05-04", "order": order}
    shown: list[str] = []
    omitted = 0
    try:
        async with Client(server) as mcp:
            for calls in range(1, 32):  # noqa: B007 (read after the loop)
                result = await mcp.call_tool("date_search_memories", window)
                page = result.structured_content
                assert not result.is_error and page is not None
                shown += [m["content"].split(":")[0] for m in page["memories"]]
                omitted += page["omitted"]
                if not page["truncated"]:
                    break
                bound = "to_date" if order == "newest_first" else "from_date"
                window[bound] = page["returned"]["from" if order == "newest_first" else "to"]
    finally:
        await client.aclose()
        vault.http.close()
        vault.store.close()
    expected = [f"Standup note {m}" for m in range(30)]
    assert shown == (expected[::-1] if order == "newest_first" else expected)
    assert omitted == 0 and calls == 30  # one row a page: the vault's pages of two did not fit
