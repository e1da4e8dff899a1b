"""`mcp-memoryrouter serve` for the conformance suite, which calls fixture tools by fixed names.

The suite's undeclared-capability checks (server-stateless, SEP-2575) call a tool named
`test_missing_capability` without declaring sampling and expect -32021 with HTTP 400. This
server's own tool that needs sampling is `reflect_memories`; here the very same function is
also offered under the suite's name, so those checks run against the server's real refusal
on the real HTTP stack. Nothing else differs from `serve`; the production server never offers
this name.
"""

from __future__ import annotations

import sys
from typing import Any

from mcp.server import MCPServer

import mcp_memoryrouter.app as app
from mcp_memoryrouter.cli import main
from mcp_memoryrouter.mcp_server.tools.reflect import reflect_memories

_build = app.build_server


def build_with_fixtures(*args: Any, **kwargs: Any) -> MCPServer:
    server = _build(*args, **kwargs)
    server.add_tool(
        reflect_memories,
        name="test_missing_capability",
        description="reflect_memories under the name the conformance suite calls: it needs the "
        "client's sampling capability.",
    )
    return server


app.build_server = build_with_fixtures

if __name__ == "__main__":
    main(["serve", *sys.argv[1:]])
