"""The catalog: the tools and resources the server offers, each with the scope
``scopes.yaml`` gives it, checked against that file and built into the server.

A tool is a plain module-level function (``mcp_server/tools/``) listed in its module's ``TOOLS``
with the copy a model reads; its vault binding comes in by injection (``binding.Vault``),
which is where its scope is enforced. The published schemas are outlines: input schemas
without generated titles, output schemas one level deep, so the catalog a host loads every
turn stays small.

Every tool carries its title twice (``title`` and ``annotations.title``) and says explicitly
whether it only reads and whether it destroys, as the hosts' directories require; both
hints must agree with the tool's scope in ``scopes.yaml`` or the server does not start. A
memory key is listed only the tools and resources it may use (a key cannot step up; an
OAuth grant is listed everything, and steps up when a call needs more).

A tool may name a view (an MCP App, the ext-apps specification 2026-01-26): a ``ui://``
resource of MIME ``text/html;profile=mcp-app`` the host renders beside the answer, named in
the tool's ``_meta.ui.resourceUri``; the server does not start when the resource is not in the
catalog with that MIME. A tool only a view calls is listed with ``visibility: ["app"]`` (hosts
keep it from the model) and is held to ``scopes.yaml`` like every other.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from mcp.server import MCPServer, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.request_state import RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_REQUEST, ToolAnnotations

from mcp_memoryrouter.auth.scopes import TOOL_HINTS, PolicyError, Scope
from mcp_memoryrouter.mcp_server.binding import Binder, VaultBinding
from mcp_memoryrouter.mcp_server.catalog_schema import input_outline, output_outline

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
MAX_NAME = 64  # Claude's connector directory refuses longer tool names
APP_MIME = "text/html;profile=mcp-app"  # ext-apps 2026-01-26: the MIME of a view's resource
Visibility = Literal["model", "app"]
# the lists a memory key is shown only what it may use of: method -> (field, what names one)
_LISTS: dict[str, tuple[str, str]] = {
    "tools/list": ("tools", "name"),
    "resources/list": ("resources", "uri"),
}


@dataclass(frozen=True)
class ToolSpec:
    """A tool: its function (named as the tool), title, description and annotations."""

    fn: Callable[..., Awaitable[Any]]
    title: str
    description: str
    annotations: ToolAnnotations
    view: str | None = None  # the ui:// resource the host renders the result in
    visibility: tuple[Visibility, ...] = ("model", "app")  # who may call it: ("app",) hides it


@dataclass(frozen=True)
class ResourceSpec:
    """A resource: a function of the call's binding that returns the resource's text."""

    uri: str
    read: Callable[[VaultBinding], Awaitable[str]]
    name: str
    title: str
    description: str
    mime_type: str = "application/json"
    meta: dict[str, Any] | None = None  # a view's CSP and border (``_meta.ui``)


def assemble(
    name: str,
    version: str,
    instructions: str,
    binder: Binder,
    tools: Iterable[ToolSpec],
    resources: Iterable[ResourceSpec],
    request_state_key: bytes | None = None,
) -> MCPServer:
    """The server with every tool and resource; stops with PolicyError when scopes.yaml and
    the catalog disagree. ``request_state_key`` seals what a multi-round tool call keeps
    between rounds (the SDK's ``RequestStateSecurity``): any process holding it can carry the
    next round (None: a key of this process only)."""
    specs, readers = list(tools), list(resources)
    binder.policy.check_covers([s.fn.__name__ for s in specs], [r.uri for r in readers])
    _check_views(specs, readers)
    built = [_tool(spec, binder) for spec in specs]

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[Binder]:
        yield binder  # what a tool's ``Vault`` parameter is bound through

    server = MCPServer(
        name,
        version=version,
        instructions=instructions,
        tools=built,
        log_level="WARNING",
        lifespan=lifespan,
        request_state_security=None
        if request_state_key is None
        else RequestStateSecurity(keys=[request_state_key]),
    )
    server.middleware.append(_ListedForTheKey(binder))
    for spec in readers:
        server.resource(
            spec.uri,
            name=spec.name,
            title=spec.title,
            description=spec.description,
            mime_type=spec.mime_type,
            meta=spec.meta,
        )(_reader(spec, binder))
    return server


def _tool(spec: ToolSpec, binder: Binder) -> Tool:
    name = spec.fn.__name__
    scope = binder.policy.for_tool(name)
    if scope is None:
        raise PolicyError(f"tool {name!r} has no entry in scopes.yaml")
    _check_hints(name, scope, spec.annotations)
    annotations = spec.annotations.model_dump_json()
    key = (spec.fn, spec.title, spec.description, annotations, spec.view, spec.visibility, scope)
    published = _PUBLISHED.get(key)
    if published is None:
        published = _PUBLISHED[key] = _published(spec, scope)
    return published.model_copy()  # each server its own tool; the schemas are shared


# A tool as published depends on its spec and scope alone, and generating its schemas from
# its signature is most of building a server (25 ms a tool): each is built once a process.
_PUBLISHED: dict[tuple[object, ...], Tool] = {}


def _published(spec: ToolSpec, scope: Scope) -> Tool:
    tool = Tool.from_function(
        spec.fn,
        title=spec.title,
        description=spec.description,
        annotations=spec.annotations.model_copy(update={"title": spec.title}),
        meta=_tool_meta(spec, scope),
    )
    tool.parameters = input_outline(tool.parameters)
    if tool.fn_metadata.output_schema is not None:
        tool.fn_metadata.output_schema = output_outline(tool.fn_metadata.output_schema)
    return tool


def _tool_meta(spec: ToolSpec, scope: Scope) -> dict[str, Any]:
    # the scope each tool needs, where ChatGPT reads it
    meta: dict[str, Any] = {"securitySchemes": [{"type": "oauth2", "scopes": [scope]}]}
    ui: dict[str, Any] = {}
    if spec.view is not None:
        ui["resourceUri"] = spec.view
    if set(spec.visibility) != {"model", "app"}:  # the default says nothing
        ui["visibility"] = list(spec.visibility)
    if ui:
        meta["ui"] = ui
    return meta


def _check_views(specs: list[ToolSpec], readers: list[ResourceSpec]) -> None:
    """Every view a tool names is a ``ui://`` resource of the catalog served as an MCP App."""
    apps = {r.uri for r in readers if r.uri.startswith("ui://") and r.mime_type == APP_MIME}
    for spec in specs:
        if spec.view is not None and spec.view not in apps:
            raise PolicyError(
                f"tool {spec.fn.__name__!r} names the view {spec.view!r}, which the server "
                f"does not offer as a ui:// resource of MIME {APP_MIME}"
            )
        if not spec.visibility:
            raise PolicyError(f"tool {spec.fn.__name__!r} is visible to neither model nor app")


def _reader(spec: ResourceSpec, binder: Binder) -> Callable[[], Awaitable[str]]:
    scope = binder.policy.for_resource(spec.uri)
    if scope is None:
        raise PolicyError(f"resource {spec.uri!r} has no entry in scopes.yaml")

    async def read() -> str:
        try:
            binding = await binder.bind(scope)
        except ToolError as exc:  # a refusal, said as the protocol's error (not a 500)
            raise MCPError(INVALID_REQUEST, str(exc)) from exc
        return await spec.read(binding)

    return read


def _check_hints(name: str, scope: Scope, hints: ToolAnnotations) -> None:
    """The tool's name fits the directories, and its hints are explicit and what its scope
    implies (a host gates calls by them: ChatGPT asks before every call to a tool it takes
    for a write)."""
    if len(name) > MAX_NAME:
        raise PolicyError(f"tool {name!r} has a name longer than {MAX_NAME} characters")
    expected = TOOL_HINTS[scope]
    if (hints.read_only_hint, hints.destructive_hint) != expected:
        raise PolicyError(
            f"tool {name!r} needs {scope} in scopes.yaml, so its readOnlyHint and "
            f"destructiveHint must be {expected[0]} and {expected[1]}"
        )
    if hints.idempotent_hint is None or hints.open_world_hint is None:
        raise PolicyError(f"tool {name!r} must say idempotentHint and openWorldHint")


class _ListedForTheKey:
    """Server middleware: ``tools/list`` and ``resources/list`` show a memory key only what
    it may use (the rest would answer it a refusal); an OAuth grant sees the whole catalog,
    since a call that needs more asks for it (the 403 step-up). The answers vary with the
    caller, as the SDK's default ``cacheScope: private`` allows."""

    def __init__(self, binder: Binder) -> None:
        self._binder = binder

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        result = await call_next(ctx)
        listed = _LISTS.get(ctx.method)
        if listed is None or not isinstance(result, dict):
            return result
        allowed = await self._binder.key_scopes()
        if allowed is None:
            return result
        field, ident = listed
        policy = self._binder.policy
        needs = policy.for_tool if field == "tools" else policy.for_resource
        items = [item for item in result.get(field, []) if needs(str(item[ident])) in allowed]
        return {**result, field: items}
