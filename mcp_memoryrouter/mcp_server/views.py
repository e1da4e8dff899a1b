"""The views: MCP Apps (ext-apps specification 2026-01-26) that hosts render beside a tool's
answer. ``search_memories`` and ``date_search_memories`` show their hits in the search view,
``inspect_memory`` a memory in the memory view; both are one self-contained page
(``static/memory-app.html``: its script and style inline, nothing loaded from anywhere),
served as ``ui://`` resources of MIME ``text/html;profile=mcp-app``.

The page speaks the protocol itself over ``postMessage`` (``ui/initialize``, then the host's
``ui/notifications/tool-input`` and ``tool-result``). What it does more goes through the host:
``tools/call`` for a reflection's sources and a forget's dry run (the host's connection, so
the connection's own token and scopes; a destructive call meets the host's confirmation), and
``ui/message`` to ask the host's model to consolidate. The one tool only the page calls,
``memory_view_abilities``, tells it what to offer; hosts keep it from the model.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import BaseModel

from mcp_memoryrouter.mcp_server.binding import VaultBinding, bind_call
from mcp_memoryrouter.mcp_server.budget import shaped
from mcp_memoryrouter.mcp_server.catalog import APP_MIME, READ_ONLY, ResourceSpec, ToolSpec

SEARCH_VIEW = "ui://memoryrouter/search.html"
MEMORY_VIEW = "ui://memoryrouter/memory.html"
# _meta.ui of both resources: the page needs nothing from any origin (empty lists: the
# host's most restrictive policy), and asks for the host's border.
VIEW_META: dict[str, Any] = {
    "ui": {
        "csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": []},
        "prefersBorder": True,
    }
}
ViewName = Literal["search", "memory"]
_MARK = '<body data-view="search">'


@cache
def page(view: ViewName) -> str:
    """The page, opening on ``view``."""
    text = resources.files(__package__).joinpath("static/memory-app.html").read_text("utf-8")
    if _MARK not in text:
        raise RuntimeError(f"static/memory-app.html lost its {_MARK!r}")
    return text.replace(_MARK, f'<body data-view="{view}">')


async def search_view(_: VaultBinding) -> str:
    return page("search")


async def memory_view(_: VaultBinding) -> str:
    return page("memory")


class AbilitiesOutput(BaseModel):
    forget: bool  # the page offers "forget this" (delete_memories)
    consolidate: bool  # the page offers to ask the host's model to consolidate


async def memory_view_abilities(
    ctx: Context[Any, Any],
) -> Annotated[CallToolResult, AbilitiesOutput]:
    """What the connection may do, so the page offers no action it would be refused: a memory
    key exactly the tools it may call (it cannot step up), an OAuth grant everything (its
    client asks for a scope it lacks when the call needs it)."""
    vault = await bind_call(ctx)
    policy = ctx.request_context.lifespan_context.policy

    def may(tool: str) -> bool:
        return vault.key is None or policy.for_tool(tool) in vault.scopes

    return shaped(
        AbilitiesOutput(forget=may("delete_memories"), consolidate=may("consolidate_memories"))
    )


RESOURCES = (
    ResourceSpec(
        SEARCH_VIEW,
        search_view,
        name="search-view",
        title="Memory search view",
        description="The hits of a search as an app: tier, date and importance, a "
        "reflection's lineage down to its sources, the reflection debt.",
        mime_type=APP_MIME,
        meta=VIEW_META,
    ),
    ResourceSpec(
        MEMORY_VIEW,
        memory_view,
        name="memory-view",
        title="Memory view",
        description="A memory as an app: its text, evidence and sources, and forgetting it "
        "after a dry run.",
        mime_type=APP_MIME,
        meta=VIEW_META,
    ),
)

TOOLS = (
    ToolSpec(
        memory_view_abilities,
        "What the memory view may offer",
        "For the memory views: may this connection forget, and consolidate.",
        READ_ONLY,
        visibility=("app",),
    ),
)
