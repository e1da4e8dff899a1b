"""The memory tools, one module per scope. Each tool is thin: arguments → one client call →
a shaped result. Backend rejections become tool errors a model can act on."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import ValidationError

from mcp_memoryrouter.auth.scopes import PolicyError, ScopePolicy
from mcp_memoryrouter.errors import MemoryRouterError

F = TypeVar("F", bound=Callable[..., Any])

TIER_GUIDE = """
Tier guide: tier 3 holds the highest-level consolidated reflections (identity, principles,
what matters most); tier 2 holds reflections of specific meaningful events; tier 1 holds raw
verbatim memories. Only tiers 2 and 3 carry importance (1-10). Match filters to the question:
- Specific-topic lookups ("find the decision about X"): omit tiers and importance, so raw,
  tier 2 and tier 3 are searched together; a high importance filter hides the detail sought.
- Big-picture overviews ("what do you know about this area"): tiers [3], no importance.
- "Most important things we've done": tiers [3], importance 8 or higher, a large limit (250).
- Specific meaningful events without raw noise: tiers [2] (or [2, 3]).
- Exact verbatim detail: search tiers [3] for the thread, then inspect_memory down the lineage
  to the tier 2 reflections and the raw memories underneath."""


@asynccontextmanager
async def backend_errors() -> AsyncIterator[None]:
    """Turn a vault rejection, or arguments the wire models refuse, into an ``isError``
    result whose text names the problem."""
    try:
        yield
    except MemoryRouterError as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "arguments"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ToolError(f"invalid_request: {field}: {message}") from exc


class Catalog:
    """Registers tools and resources on the server with the scope ``scopes.yaml`` names,
    advertised per tool in ``_meta.securitySchemes`` (what ChatGPT reads)."""

    def __init__(self, server: MCPServer, policy: ScopePolicy) -> None:
        self.server = server
        self.policy = policy
        self.tools: list[str] = []
        self.resources: list[str] = []

    def tool(
        self, *, title: str, description: str, annotations: ToolAnnotations
    ) -> Callable[[F], F]:
        def register(fn: F) -> F:
            name = fn.__name__
            scope = self.policy.for_tool(name)
            if scope is None:
                raise PolicyError(f"tool {name!r} has no entry in scopes.yaml")
            self.tools.append(name)
            meta = {"securitySchemes": [{"type": "oauth2", "scopes": [scope]}]}
            decorate = self.server.tool(
                title=title, description=description, annotations=annotations, meta=meta
            )
            return decorate(fn)

        return register

    def resource(self, uri: str, **options: Any) -> Callable[[F], F]:
        self.resources.append(uri)
        return self.server.resource(uri, **options)

    def check(self) -> None:
        self.policy.check_covers(self.tools, self.resources)
