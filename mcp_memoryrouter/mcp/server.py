"""Build the MCP server: the tools and resources, checked against scopes.yaml."""

from __future__ import annotations

from mcp.server import MCPServer

from mcp_memoryrouter import __version__
from mcp_memoryrouter.auth.scopes import ScopePolicy
from mcp_memoryrouter.mcp import resources
from mcp_memoryrouter.mcp.binding import Resolver
from mcp_memoryrouter.mcp.budget import Budget
from mcp_memoryrouter.mcp.tools import Catalog, connector, delete, lineage, read, reflect, write

SERVER_NAME = "memoryrouter"
INSTRUCTIONS = (
    "MemoryRouter is the user's long-term memory, in three tiers: raw memories (exact moments), "
    "reflections (what happened) and high-level reflections (why it matters). Search it "
    "(search_memories, date_search_memories) when the conversation may depend on the past; "
    "drill into any result with inspect_memory. Store what the user wants remembered with "
    "store_memory. When a result carries consolidation_suggestion, offer to consolidate: call "
    "consolidate_memories, write the entries exactly as its reflection_contract instructs, and "
    "commit them with commit_reflections."
)


def build_server(resolve: Resolver, policy: ScopePolicy, budget: Budget) -> MCPServer:
    """The server with every tool and resource, each result within ``budget``; stops with
    PolicyError when scopes.yaml and the catalog disagree."""
    catalog = Catalog(policy, budget)
    for module in (read, lineage, connector, write, reflect, delete, resources):
        module.register(catalog, resolve)
    return catalog.build(SERVER_NAME, __version__, INSTRUCTIONS)
