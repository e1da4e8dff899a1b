"""The memory tools, one module per scope. Each tool is thin: arguments → one client call →
a result shaped to the result budget. Backend rejections become tool errors a model can act
on."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import ValidationError

from mcp_memoryrouter.auth.scopes import PolicyError, ScopePolicy
from mcp_memoryrouter.errors import MemoryRouterError
from mcp_memoryrouter.mcp.budget import Budget
from mcp_memoryrouter.mcp.catalog_schema import input_outline, output_outline

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger(__name__)

# Tool annotations: exact, since hosts gate tools by them (ChatGPT offers only read tools on
# some plans). readOnly: changes nothing; idempotent: repeating the call changes nothing more.
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
WRITES_IDEMPOTENT = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)


@asynccontextmanager
async def backend_errors() -> AsyncIterator[None]:
    """Turn a vault rejection or failure, or arguments the wire models refuse, into an
    ``isError`` result whose text names the problem (and, for a failure, its class)."""
    try:
        yield
    except ToolError:
        raise
    except MemoryRouterError as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc
    except ValidationError as exc:
        if not exc.title.endswith(("Request", "In")):  # the vault's answer, not the arguments
            raise ToolError(
                f"transport_failure: the vault answered with a body that is not a valid "
                f"{exc.title} (ValidationError); is it the same MemoryRouter version?"
            ) from exc
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "arguments"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ToolError(f"invalid_request: {field}: {message}") from exc
    except Exception as exc:
        log.exception("tool call failed")
        raise ToolError(
            f"internal_error: the call failed with {type(exc).__name__}; try again, and if it "
            "persists the server log has the details"
        ) from exc


class Catalog:
    """Collects tools and resources with the scope ``scopes.yaml`` names, advertised per tool
    in ``_meta.securitySchemes`` (what ChatGPT reads), and builds the server from them.

    The published schemas are outlines: input schemas without generated titles, output
    schemas one level deep, so the catalog a host loads every turn stays small."""

    def __init__(self, policy: ScopePolicy, budget: Budget) -> None:
        self.policy = policy
        self.budget = budget
        self.built: list[Tool] = []
        self._resources: list[tuple[str, dict[str, Any], Callable[..., Any]]] = []

    @property
    def tools(self) -> list[str]:
        return [tool.name for tool in self.built]

    @property
    def resources(self) -> list[str]:
        return [uri for uri, _, _ in self._resources]

    def tool(
        self, *, title: str, description: str, annotations: ToolAnnotations
    ) -> Callable[[F], F]:
        def register(fn: F) -> F:
            scope = self.policy.for_tool(fn.__name__)
            if scope is None:
                raise PolicyError(f"tool {fn.__name__!r} has no entry in scopes.yaml")
            meta = {"securitySchemes": [{"type": "oauth2", "scopes": [scope]}]}
            tool = Tool.from_function(
                fn, title=title, description=description, annotations=annotations, meta=meta
            )
            tool.parameters = input_outline(tool.parameters)
            if tool.fn_metadata.output_schema is not None:
                tool.fn_metadata.output_schema = output_outline(tool.fn_metadata.output_schema)
            self.built.append(tool)
            return fn

        return register

    def resource(self, uri: str, **options: Any) -> Callable[[F], F]:
        def register(fn: F) -> F:
            self._resources.append((uri, options, fn))
            return fn

        return register

    def build(self, name: str, version: str, instructions: str) -> MCPServer:
        self.policy.check_covers(self.tools, self.resources)
        server = MCPServer(
            name, version=version, instructions=instructions, tools=self.built, log_level="WARNING"
        )
        for uri, options, fn in self._resources:
            server.resource(uri, **options)(fn)
        return server
