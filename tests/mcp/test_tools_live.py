"""The MCP tools end to end: the SDK's own client, a real uvicorn, both protocol eras,
embedded and proxying to a separately started vault."""

from __future__ import annotations

import json
import re

import pytest
from mcp.types import CallToolResult

from tests.support.mcp import McpServer, Mode, ok

pytestmark = pytest.mark.anyio
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
EXPECTED_TOOLS = {
    "memory_view_abilities",  # for the views alone (visibility: app)
    "search_memories",
    "date_search_memories",
    "inspect_memory",
    "memory_status",
    "search",
    "fetch",
    "store_memory",
    "consolidate_memories",
    "commit_reflections",
    "reflect_memories",
    "delete_memories",
    "forget_all_memories",
}


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> Mode:
    value: Mode = request.param
    return value


def everything(result: CallToolResult) -> str:
    return json.dumps(result.model_dump(mode="json", by_alias=True))


async def test_the_catalog_lists_thirteen_tools_with_schemas_and_annotations(
    mcp_server: McpServer, mode: Mode
) -> None:
    async with mcp_server.client(mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert set(tools) == EXPECTED_TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 60
        assert tool.output_schema is not None and tool.input_schema["type"] == "object"
        assert tool.annotations is not None and tool.annotations.open_world_hint is False
        assert tool.meta and tool.meta["securitySchemes"][0]["type"] == "oauth2"
    assert tools["search_memories"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tools["delete_memories"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert tools["commit_reflections"].annotations.idempotent_hint is True  # type: ignore[union-attr]
    assert "Tiers: 3 = " in (tools["search_memories"].description or "")


async def test_store_then_search_with_tier_and_importance_filters(
    mcp_server: McpServer, mode: Mode
) -> None:
    async with mcp_server.client(mode=mode) as client:
        stored = ok(
            await client.call_tool(
                "store_memory",
                {"content": "We chose Postgres for the billing service.", "date": "2026-02-03"},
            )
        )
        assert stored["stored"] == 1
        hits = ok(await client.call_tool("search_memories", {"query": "postgres billing"}))
        assert hits["memories"][0]["tier"] == 1
        assert hits["memories"][0]["date"] == "2026-02-03T00:00:00.000Z"
        none = ok(await client.call_tool("search_memories", {"query": "postgres", "tiers": [2, 3]}))
        assert none["memories"] == []
        filtered = ok(
            await client.call_tool("search_memories", {"query": "postgres", "importance": 5})
        )
        assert filtered["memories"] == []
        bad = await client.call_tool("search_memories", {"query": "x", "tiers": [7]})
        assert bad.is_error


async def test_consolidation_round_trip_never_shows_a_memory_id(
    mcp_server: McpServer, mode: Mode
) -> None:
    async with mcp_server.client(mode=mode) as client:
        ids: list[str] = []
        for day in range(1, 6):
            ok(
                await client.call_tool(
                    "store_memory",
                    {
                        "content": f"Day {day}: shipped part {day} of the importer.",
                        "date": f"2026-03-0{day}",
                    },
                )
            )
        found = ok(await client.call_tool("search_memories", {"query": "importer", "limit": 10}))
        ids = [m["id"] for m in found["memories"]]
        assert len(ids) == 5
        checkout = await client.call_tool("consolidate_memories", {"tier": 1})
        batch = ok(checkout)
        text = everything(checkout)
        assert "source_ids" not in text
        assert not any(memory_id in text for memory_id in ids)
        assert not UUID.search(text)
        assert batch["reflection_contract"]["target_tier"] == 2
        assert [m["date"][:10] for m in batch["memories"]] == [f"2026-03-0{d}" for d in range(1, 6)]
        # the scripted "model": one entry per memory text, from the texts alone
        entries = [
            {"text": f"The team {m['text'].split(': ', 1)[1]}", "importance": 6}
            for m in batch["memories"]
        ]
        commit = await client.call_tool(
            "commit_reflections", {"batch_id": batch["batch_id"], "entries": entries}
        )
        done = ok(commit)
        assert not UUID.search(everything(commit))
        assert (done["reflections_created"], done["sources_consolidated"], done["tier"]) == (
            5,
            5,
            2,
        )
        replay = ok(
            await client.call_tool(
                "commit_reflections", {"batch_id": batch["batch_id"], "entries": entries}
            )
        )
        assert replay["already_committed"] is True
        empty = ok(await client.call_tool("consolidate_memories", {"tier": 1}))
        assert "batch_id" not in empty and empty["count"] == 0  # no batch: left out, not null


async def test_inspect_drills_down_and_up(mcp_server: McpServer, mode: Mode) -> None:
    async with mcp_server.client(mode=mode) as client:
        ok(
            await client.call_tool(
                "store_memory", {"content": "Moved the office to Lisbon.", "date": "2026-04-01"}
            )
        )
        batch = ok(await client.call_tool("consolidate_memories", {}))
        ok(
            await client.call_tool(
                "commit_reflections",
                {
                    "batch_id": batch["batch_id"],
                    "entries": [
                        {
                            "text": "The company relocated its office to Lisbon in April 2026.",
                            "importance": 8,
                        }
                    ],
                },
            )
        )
        reflection = ok(
            await client.call_tool("search_memories", {"query": "Lisbon office", "tiers": [2]})
        )
        top = reflection["memories"][0]
        assert top["importance"] == 8 and "covers" in top
        down = ok(await client.call_tool("inspect_memory", {"memory_id": top["id"]}))
        assert [s["content"] for s in down["sources"]] == ["Moved the office to Lisbon."]
        up = ok(await client.call_tool("inspect_memory", {"memory_id": down["sources"][0]["id"]}))
        assert [r["id"] for r in up["consolidated_into"]] == [top["id"]]
        missing = await client.call_tool("inspect_memory", {"memory_id": "nope"})
        assert missing.is_error
        assert "not_found" in everything(missing)


async def test_date_search_and_search_within_a_period(mcp_server: McpServer, mode: Mode) -> None:
    async with mcp_server.client(mode=mode) as client:
        for date, text in [
            ("2026-01-10", "January deploy"),
            ("2026-02-10", "February deploy"),
            ("2026-02-20", "February retro"),
        ]:
            ok(await client.call_tool("store_memory", {"content": text, "date": date}))
        page = ok(
            await client.call_tool(
                "date_search_memories", {"from_date": "2026-02-01", "to_date": "2026-02-28"}
            )
        )
        assert [m["content"] for m in page["memories"]] == ["February retro", "February deploy"]
        assert page["truncated"] is False
        hits = ok(
            await client.call_tool(
                "search_memories",
                {"query": "deploy", "from_date": "2026-02-01", "to_date": "2026-02-28"},
            )
        )
        assert [m["content"] for m in hits["memories"]] == ["February deploy"]


async def test_delete_and_forget_all_with_and_without_the_phrase(
    mcp_server: McpServer, mode: Mode
) -> None:
    async with mcp_server.client(mode=mode) as client:
        for text in ("keep me", "drop me"):
            ok(await client.call_tool("store_memory", {"content": text, "date": "2026-05-01"}))
        drop = ok(await client.call_tool("search_memories", {"query": "drop"}))["memories"][0]
        deleted = ok(await client.call_tool("delete_memories", {"ids": [drop["id"], "unknown"]}))
        assert (deleted["deleted"], deleted["not_found"]) == (1, 1)
        refused = await client.call_tool("forget_all_memories", {"confirmation": "delete all"})
        assert refused.is_error
        assert ok(await client.call_tool("memory_status", {}))["total_memories"] == 1
        wiped = ok(
            await client.call_tool("forget_all_memories", {"confirmation": "DELETE ALL MEMORIES"})
        )
        assert wiped["deleted"] == 1
        assert ok(await client.call_tool("memory_status", {}))["total_memories"] == 0


async def test_store_memory_refuses_obvious_secrets(mcp_server: McpServer) -> None:
    secrets = [
        "my password is hunter22",
        "OPENAI key sk-proj-abcdefghijklmnopqrstuvwxyz123456",
        "aws AKIAABCDEFGHIJKLMNOP",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE...",
        f"the vault key {mcp_server.key}",
    ]
    async with mcp_server.client() as client:
        for text in secrets:
            result = await client.call_tool("store_memory", {"content": text})
            assert result.is_error, text
            assert "refused" in everything(result)
        status = ok(await client.call_tool("memory_status", {}))
    assert status["total_memories"] == 0


async def test_memory_status_shows_a_vault_reference_and_scopes_never_the_key(
    mcp_server: McpServer,
) -> None:
    async with mcp_server.client() as client:
        result = await client.call_tool("memory_status", {})
    status = ok(result)
    assert status["vault"].startswith("vr_")
    assert status["granted_scopes"] == [
        "memories:delete",
        "memories:read",
        "memories:reflect",
        "memories:write",
    ]
    assert status["connected"] is True and status["storage"] == "sqlite"
    assert mcp_server.key not in everything(result)
    assert mcp_server.key[3:20] not in everything(result)


async def test_search_and_fetch_have_the_connector_shapes(mcp_server: McpServer) -> None:
    async with mcp_server.client() as client:
        ok(await client.call_tool("store_memory", {"content": "Budget review moved to Friday."}))
        result = await client.call_tool("search", {"query": "budget review"})
        found = ok(result)
        assert len(result.content) == 1 and result.content[0].type == "text"
        assert json.loads(result.content[0].text) == found
        hit = found["results"][0]
        assert set(hit) == {"id", "title", "url"}
        fetched = await client.call_tool("fetch", {"id": hit["id"]})
        doc = ok(fetched)
        assert len(fetched.content) == 1
        assert set(doc) == {"id", "title", "text", "url", "metadata"}
        assert doc["text"] == "Budget review moved to Friday." and doc["metadata"]["tier"] == 1


async def test_resources_list_and_read(mcp_server: McpServer, mode: Mode) -> None:
    async with mcp_server.client(mode=mode) as client:
        ok(await client.call_tool("store_memory", {"content": "resource check"}))
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert uris == {
            "memory://vault/stats",
            "memory://vault/recent",
            "ui://memoryrouter/search.html",  # the views (tests/mcp/test_views.py)
            "ui://memoryrouter/memory.html",
        }
        stats = await client.read_resource("memory://vault/stats")
        assert json.loads(stats.contents[0].text)["total_memories"] == 1  # type: ignore[union-attr]
        recent = await client.read_resource("memory://vault/recent")
        newest = json.loads(recent.contents[0].text)  # type: ignore[union-attr]
        assert newest["memories"][0]["content"] == "resource check" and newest["omitted"] == 0


async def test_read_tools_surface_the_debt_suggestion(mcp_server: McpServer) -> None:
    async with mcp_server.client() as client:
        for n in range(3):  # ~66,000 tokens: past the 50,000-token threshold
            text = " ".join(f"w{n}x{i}" for i in range(12_000))
            ok(await client.call_tool("store_memory", {"content": text, "date": "2026-01-01"}))
        hits = ok(await client.call_tool("search_memories", {"query": "w1x5"}))
        status = ok(await client.call_tool("memory_status", {}))
    assert hits["consolidation_suggestion"].startswith("raw consolidation suggested")
    assert status["consolidation_suggestion"] == hits["consolidation_suggestion"]
