"""The catalog a host loads into the model's context every turn: small, each thing said
once, and annotations that say exactly what each tool does."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from mcp_memoryrouter.auth.scopes import load_policy
from mcp_memoryrouter.tokens import est_tokens
from tests.support.mcp import McpServer

pytestmark = pytest.mark.anyio

# (readOnlyHint, destructiveHint, idempotentHint): hosts gate write tools by these
ANNOTATIONS = {
    "search_memories": (True, False, True),
    "date_search_memories": (True, False, True),
    "inspect_memory": (True, False, True),
    "memory_status": (True, False, True),
    "search": (True, False, True),
    "fetch": (True, False, True),
    "store_memory": (False, False, False),
    "consolidate_memories": (False, False, False),  # each call leases a new batch
    "commit_reflections": (False, False, True),  # a replay writes nothing twice
    "reflect_memories": (False, False, False),
    "delete_memories": (False, True, True),
    "forget_all_memories": (False, True, True),
    "memory_view_abilities": (True, False, True),  # the views' own (visibility: app)
}


async def tools_list(server: McpServer) -> list[dict[str, Any]]:
    async with server.client() as client:
        listed = await client.list_tools()
    tools: list[dict[str, Any]] = listed.model_dump(mode="json", by_alias=True, exclude_none=True)[
        "tools"
    ]
    return tools


async def test_tools_list_fits_4000_tokens_and_what_the_model_reads_2000(
    embedded: McpServer,
) -> None:
    tools = await tools_list(embedded)
    whole = json.dumps({"tools": tools}, separators=(",", ":"))
    # what the model reads: hosts keep a tool for the views alone (visibility: app) from it
    read = [t for t in tools if t["_meta"].get("ui", {}).get("visibility") != ["app"]]
    core = json.dumps(
        [{k: t[k] for k in ("name", "description", "inputSchema")} for t in read],
        separators=(",", ":"),
    )
    assert len(tools) == 13
    assert est_tokens(whole) <= 4_000, est_tokens(whole)
    assert est_tokens(core) <= 2_000, est_tokens(core)


async def test_the_tier_guide_is_said_once(embedded: McpServer) -> None:
    descriptions = [t["description"] for t in await tools_list(embedded)]
    assert sum("Tiers: 3 = " in d for d in descriptions) == 1


async def test_schemas_keep_what_a_model_needs_to_call_and_read_a_tool(
    embedded: McpServer,
) -> None:
    tools = {t["name"]: t for t in await tools_list(embedded)}
    search = tools["search_memories"]["inputSchema"]
    assert search["required"] == ["query"]
    assert search["properties"]["limit"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 250,
        "default": 10,
    }
    assert search["properties"]["tiers"]["items"] == {"enum": [1, 2, 3], "type": "integer"}
    entries = tools["commit_reflections"]["inputSchema"]["properties"]["entries"]["items"]
    assert set(entries["required"]) == {"text", "importance"}  # inlined, no dangling $ref
    assert "title" not in json.dumps(search)
    output = tools["inspect_memory"]["outputSchema"]
    assert output["properties"]["sources"] == {"type": "array", "items": {"type": "object"}}
    assert output["properties"]["next_offset"] == {"type": "integer"}
    assert "next_offset" not in output["required"]  # optional: left out when there is none


async def test_annotations_are_exact(embedded: McpServer) -> None:
    tools = await tools_list(embedded)
    found = {
        t["name"]: (
            t["annotations"]["readOnlyHint"],
            t["annotations"]["destructiveHint"],
            t["annotations"]["idempotentHint"],
        )
        for t in tools
    }
    assert found == ANNOTATIONS
    assert all(t["annotations"]["openWorldHint"] is False for t in tools)


def nulls_and_type_arrays(node: object, path: str = "") -> list[str]:
    """Where ``node`` (a JSON schema, walked whole) has a ``type`` array or names null."""
    found: list[str] = []
    if isinstance(node, dict):
        kind = node.get("type")
        if isinstance(kind, list) or kind == "null":
            found.append(f"{path}.type = {kind!r}")
        for key, value in node.items():
            found += nulls_and_type_arrays(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            found += nulls_and_type_arrays(item, f"{path}[{i}]")
    return found


async def test_no_tool_schema_has_a_type_array_or_a_null_branch(embedded: McpServer) -> None:
    """What the Inspector counts as schema portability warnings: none, in or out."""
    found = [
        f"{tool['name']}.{kind}{where}"
        for tool in await tools_list(embedded)
        for kind in ("inputSchema", "outputSchema")
        for where in nulls_and_type_arrays(tool.get(kind, {}))
    ]
    assert found == []


async def test_a_result_leaves_out_what_has_no_value_and_matches_its_schema(
    embedded: McpServer,
) -> None:
    """The SDK's client checks every result against the tool's output schema: an empty
    vault's status (no oldest, no newest) and a store without a suggestion pass it."""
    async with embedded.client() as client:
        status = await client.call_tool("memory_status", {})
        stored = await client.call_tool("store_memory", {"content": "Schemas name no null."})
    assert not status.is_error and not stored.is_error
    assert isinstance(status.structured_content, dict)
    assert "oldest" not in status.structured_content
    assert "newest" not in status.structured_content
    assert isinstance(stored.structured_content, dict)
    assert "consolidation_suggestion" not in stored.structured_content
    assert None not in status.structured_content.values()


async def test_every_tool_has_a_title_and_says_whether_it_reads_and_whether_it_destroys(
    embedded: McpServer,
) -> None:
    """What Claude's connector directory requires of every tool (a title, an explicit
    readOnlyHint or destructiveHint, a name of at most 64 characters), and what ChatGPT reads
    (a tool without readOnlyHint is a write it asks about on every call); the hints agree
    with the tool's scope in scopes.yaml."""
    policy = load_policy()
    tools = await tools_list(embedded)
    assert len(tools) == 13
    for tool in tools:
        name, hints = tool["name"], tool["annotations"]
        assert re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name), name
        assert tool["title"] and hints["title"] == tool["title"], name
        for hint in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"):
            assert isinstance(hints.get(hint), bool), (name, hint)
        scope = policy.for_tool(name)
        assert hints["readOnlyHint"] is (scope == "memories:read"), name
        assert hints["destructiveHint"] is (scope == "memories:delete"), name
