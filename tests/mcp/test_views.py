"""The views (MCP Apps, ext-apps specification 2026-01-26) as a host finds them: the tools
name their ``ui://`` resource in ``_meta.ui.resourceUri``, the resource is the page with the
app MIME and a CSP naming no origin, the tool only the page calls is hidden from the model,
and the tools' text stays what a host without views shows. Through the SDK's client over a
real server on loopback."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mcp.types import TextResourceContents

from mcp_memoryrouter.auth.scopes import PolicyError, load_policy, parse_policy
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.mcp_server import catalog, resources, views
from mcp_memoryrouter.mcp_server.binding import Binder
from mcp_memoryrouter.mcp_server.budget import ResultBudget
from mcp_memoryrouter.mcp_server.catalog import ResourceSpec, ToolSpec
from mcp_memoryrouter.mcp_server.server import TOOLS as SERVER_TOOLS
from tests.support.mcp import McpServer, ok, text_of

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]

APP_MIME = "text/html;profile=mcp-app"
VIEWS = {
    "search_memories": "ui://memoryrouter/search.html",
    "date_search_memories": "ui://memoryrouter/search.html",
    "inspect_memory": "ui://memoryrouter/memory.html",
}


async def listed_tools(server: McpServer, key: str | None = None) -> dict[str, dict[str, Any]]:
    async with server.client(key) as client:
        found = await client.list_tools()
    dumped = found.model_dump(mode="json", by_alias=True, exclude_none=True)["tools"]
    return {t["name"]: t for t in dumped}


async def test_the_search_and_inspect_tools_name_their_view(embedded: McpServer) -> None:
    tools = await listed_tools(embedded)
    ui = {n: t["_meta"].get("ui", {}) for n, t in tools.items()}
    named = {n: u["resourceUri"] for n, u in ui.items() if "resourceUri" in u}
    # no other tool draws a view, and none is hidden but the page's helper
    assert named == VIEWS
    hidden = {n for n, t in tools.items() if t["_meta"].get("ui", {}).get("visibility")}
    assert hidden == {"memory_view_abilities"}


async def test_the_page_helper_is_for_the_app_alone_and_in_scopes_yaml(
    embedded: McpServer,
) -> None:
    tools = await listed_tools(embedded)
    helper = tools["memory_view_abilities"]
    assert helper["_meta"]["ui"]["visibility"] == ["app"]
    assert helper["annotations"]["readOnlyHint"] is True
    assert load_policy().for_tool("memory_view_abilities") == "memories:read"


@pytest.mark.parametrize("uri", sorted(set(VIEWS.values())))
async def test_a_view_reads_as_one_self_contained_page_with_its_csp(
    embedded: McpServer, uri: str
) -> None:
    async with embedded.client() as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        read = await client.read_resource(uri)
    assert listed[uri].mime_type == APP_MIME
    [content] = read.contents
    assert isinstance(content, TextResourceContents)
    assert content.mime_type == APP_MIME
    meta = content.meta or {}
    # the CSP names no origin at all: the page loads nothing and connects nowhere
    assert meta["ui"]["csp"] == {"connectDomains": [], "resourceDomains": [], "frameDomains": []}
    html = content.text
    assert html.startswith("<!doctype html>")
    assert 'data-view="' + uri.rsplit("/", 1)[1].removesuffix(".html") + '"' in html
    # nothing from elsewhere: no src or href attribute, no URL to load, no stylesheet import
    assert not re.search(r"\b(src|href)\s*=", html)
    assert not re.search(r"https?://|@import|url\(", html)
    assert "ui/initialize" in html


async def test_a_read_only_key_reads_the_views_and_is_offered_no_forget(
    embedded: McpServer,
) -> None:
    reader = embedded.new_key(read_only=True)
    async with embedded.client(reader) as client:
        read = await client.read_resource("ui://memoryrouter/memory.html")
        offered = ok(await client.call_tool("memory_view_abilities", {}))
    assert read.contents
    assert offered == {"forget": False, "consolidate": False}
    async with embedded.client() as client:
        assert ok(await client.call_tool("memory_view_abilities", {})) == {
            "forget": True,
            "consolidate": True,
        }


async def test_a_tool_that_draws_a_view_still_answers_in_full_in_its_text(
    embedded: McpServer,
) -> None:
    """A host that renders no view shows the text: it holds the whole answer."""
    tools = await listed_tools(embedded)
    async with embedded.client() as client:
        await client.call_tool("store_memory", {"content": "The user keeps bees on the roof."})
        found = await client.call_tool("search_memories", {"query": "bees"})
        memory_id = ok(found)["memories"][0]["id"]
        inspected = await client.call_tool("inspect_memory", {"memory_id": memory_id})
    for name, result in (("search_memories", found), ("inspect_memory", inspected)):
        assert tools[name]["_meta"]["ui"]["resourceUri"] == VIEWS[name]
        assert json.loads(text_of(result)) == ok(result)
        assert "bees" in text_of(result)


def _assembled(tools: list[ToolSpec], resources: list[ResourceSpec], policy: str) -> None:
    binder = Binder(VaultClient("http://127.0.0.1:9"), parse_policy(policy), ResultBudget(10_000))
    catalog.assemble("t", "0", "", binder, tools, resources)


def test_a_tool_naming_a_view_the_server_does_not_serve_stops_it() -> None:
    policy = (ROOT / "scopes.yaml").read_text()
    served = [*resources.RESOURCES, *views.RESOURCES]
    wrong = [replace(t, view="ui://memoryrouter/elsewhere.html") for t in SERVER_TOOLS]
    with pytest.raises(PolicyError, match=re.escape("elsewhere.html")):
        _assembled(wrong, served, policy)
    # nor may a view be served as anything but an MCP App
    as_json = [replace(r, mime_type="application/json") for r in served]
    with pytest.raises(PolicyError, match=re.escape(APP_MIME)):
        _assembled(list(SERVER_TOOLS), as_json, policy)
    _assembled(list(SERVER_TOOLS), served, policy)


def test_the_views_own_tool_is_held_to_scopes_yaml_like_every_tool() -> None:
    policy = (ROOT / "scopes.yaml").read_text()
    served = [*resources.RESOURCES, *views.RESOURCES]
    without = policy.replace("  memory_view_abilities: memories:read\n", "")
    with pytest.raises(PolicyError, match="memory_view_abilities"):
        _assembled(list(SERVER_TOOLS), served, without)
    # and its hints to its scope: a read that needed memories:delete would stop the server
    moved = policy.replace(
        "memory_view_abilities: memories:read", "memory_view_abilities: memories:delete"
    )
    with pytest.raises(PolicyError, match="memory_view_abilities"):
        _assembled(list(SERVER_TOOLS), served, moved)
