"""DOC"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from anyio.from_thread import BlockingPortal
from mcp.client import Client
from mcp.types import CallToolResult, TextContent

from tests.support import Vault


@dataclass
class ToolHarness:
    """An in-memory MCP client over the tools, bound to one vault's key; calls run on a
    portal's event loop so synchronous hypothesis tests can drive them."""

    vault: Vault
    client: Client
    portal: BlockingPortal
    ids: list[str]  # raw memories in the vault


def call(tools: ToolHarness, name: str, arguments: dict[str, Any]) -> CallToolResult:
    result = tools.portal.call(tools.client.call_tool, name, arguments)
    assert isinstance(result, CallToolResult)
    return result


def assert_clean(name: str, result: CallToolResult) -> None:
    if not result.is_error:
        return
    assert len(result.content) == 1
    content = result.content[0]
    assert isinstance(content, TextContent)
    # a crash is reported as the bare prefix; a deliberate error carries its reason
    assert content.text.startswith(f"Error executing tool {name}: "), content.text
    assert "internal_error" not in content.text, content.text
    assert "transport_failure" not in content.text, content.text
