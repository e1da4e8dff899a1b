"""The scope policy of ``scopes.yaml``: which scope each tool and resource needs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml

from mcp_memoryrouter.abilities import abilities
from mcp_memoryrouter.errors import StartupError

Scope = Literal["memories:read", "memories:write", "memories:reflect", "memories:delete"]
ALL_SCOPES: tuple[Scope, ...] = (
    "memories:read",
    "memories:write",
    "memories:reflect",
    "memories:delete",
)
# What a client is led to ask for at its first connection (the 401 challenge, the resource
# metadata, an authorization request naming no scope): ordinary use. memories:delete is asked
# for when a tool needs it, through the 403 insufficient_scope step-up.
FIRST_CONNECTION_SCOPES: tuple[Scope, ...] = ("memories:read", "memories:write", "memories:reflect")
# What each scope lets a caller do, in words a person reads: on the consent page as "this app
# may …" and "… now asks to …" (scopes.yaml's description says the detail beneath), and in a
# refusal as "… so it cannot …" (:func:`ability`).
SCOPE_WORDS: dict[Scope, str] = {
    "memories:read": "Read your memories",
    "memories:write": "Store new memories",
    "memories:reflect": "Consolidate your memories into reflections",
    "memories:delete": "Delete memories",
}


class PolicyError(StartupError):
    """Raised when scopes.yaml does not match the tools and resources the server offers."""


@dataclass(frozen=True)
class ScopePolicy:
    descriptions: dict[Scope, str]
    tools: dict[str, Scope]
    resources: dict[str, Scope]

    def for_tool(self, name: str) -> Scope | None:
        return self.tools.get(name)

    def for_resource(self, uri: str) -> Scope | None:
        return self.resources.get(uri)

    def check_covers(self, tools: Iterable[str], resource_uris: Iterable[str]) -> None:
        """Every offered tool and resource has an entry, and every entry is offered."""
        problems = []
        for kind, offered, mapped in (
            ("tool", set(tools), set(self.tools)),
            ("resource", set(resource_uris), set(self.resources)),
        ):
            problems += [
                f"{kind} {name!r} has no entry in scopes.yaml" for name in sorted(offered - mapped)
            ]
            problems += [
                f"scopes.yaml names {kind} {name!r}, which the server does not offer"
                for name in sorted(mapped - offered)
            ]
        if problems:
            raise PolicyError("; ".join(problems))


def _scope(value: object, where: str) -> Scope:
    if value not in ALL_SCOPES:
        raise PolicyError(f"{where}: unknown scope {value!r} (known: {', '.join(ALL_SCOPES)})")
    return value


def parse_policy(text: str) -> ScopePolicy:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError(f"scopes.yaml is not valid YAML: {exc}") from exc
    if not isinstance(data, dict) or not all(k in data for k in ("scopes", "tools", "resources")):
        raise PolicyError("scopes.yaml needs the sections scopes, tools and resources")
    descriptions = {_scope(k, "scopes"): str(v) for k, v in dict(data["scopes"]).items()}
    if set(descriptions) != set(ALL_SCOPES):
        raise PolicyError("scopes.yaml must describe each of " + ", ".join(ALL_SCOPES))
    tools = {str(k): _scope(v, f"tools.{k}") for k, v in dict(data["tools"]).items()}
    res = {str(k): _scope(v, f"resources.{k}") for k, v in dict(data["resources"]).items()}
    return ScopePolicy(descriptions, tools, res)


def load_policy(path: Path | None = None) -> ScopePolicy:
    """Read ``path``, or the scopes.yaml shipped with the package."""
    if path is not None:
        return parse_policy(path.read_text(encoding="utf-8"))
    packaged = resources.files("mcp_memoryrouter").joinpath("scopes.yaml")
    return parse_policy(packaged.read_text(encoding="utf-8"))


def scopes_for_key(read_only: bool, mode: str) -> frozenset[Scope]:
    """What a memory key presented as a bearer token may do over MCP: exactly what the vault
    lets it do, so a tool it cannot use is not listed to it and is refused before dispatch
    (a tool error saying why: a key cannot step up), where REST refuses it (the rule is
    ``abilities.py``'s): reading, writing and deleting, consolidation when it does both."""
    may = abilities(read_only, mode)
    scopes: set[Scope] = set()
    if may.reads:
        scopes.add("memories:read")
    if may.writes:
        scopes.update(("memories:write", "memories:delete"))
    if may.full:
        scopes.add("memories:reflect")
    return frozenset(scopes)


# What a tool that needs each scope is, in the hints hosts gate calls by: (readOnlyHint,
# destructiveHint). Only reading changes nothing; only deleting destroys (mcp_server/catalog.py
# holds every tool to this).
TOOL_HINTS: dict[Scope, tuple[bool, bool]] = {
    "memories:read": (True, False),
    "memories:write": (False, False),
    "memories:reflect": (False, False),
    "memories:delete": (False, True),
}


def ability(scope: Scope) -> str:
    """What a call that needs ``scope`` does, in the words of a refusal ("… so it cannot
    read your memories"): the consent page's words for it, as a phrase."""
    return SCOPE_WORDS[scope].lower()
