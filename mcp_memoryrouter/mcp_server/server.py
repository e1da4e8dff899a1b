"""Build the MCP server: every tool and resource, checked against scopes.yaml."""

from __future__ import annotations

from mcp.server import MCPServer

from mcp_memoryrouter import __version__
from mcp_memoryrouter.mcp_server import catalog, resources, views
from mcp_memoryrouter.mcp_server.binding import Binder
from mcp_memoryrouter.mcp_server.copy import INSTRUCTIONS
from mcp_memoryrouter.mcp_server.tools import connector, delete, lineage, read, reflect, write

SERVER_NAME = "memoryrouter"
TOOLS = (
    *read.TOOLS,
    *lineage.TOOLS,
    *connector.TOOLS,
    *write.TOOLS,
    *reflect.TOOLS,
    *delete.TOOLS,
    *views.TOOLS,
)


def build_server(binder: Binder, request_state_key: bytes | None = None) -> MCPServer:
    """The server with every tool and resource, each call bound (and its scope checked)
    through ``binder``; stops with PolicyError when scopes.yaml and the catalog disagree.
    ``request_state_key`` seals what ``reflect_memories`` keeps between two rounds."""
    return catalog.assemble(
        SERVER_NAME,
        __version__,
        INSTRUCTIONS,
        binder,
        TOOLS,
        (*resources.RESOURCES, *views.RESOURCES),
        request_state_key,
    )
