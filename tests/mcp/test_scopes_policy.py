"""scopes.yaml and the catalog agree both ways, or the server does not start."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_memoryrouter.auth.scopes import (
    ALL_SCOPES,
    PolicyError,
    ScopePolicy,
    load_policy,
    parse_policy,
)
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.mcp_server.binding import Binder
from mcp_memoryrouter.mcp_server.budget import ResultBudget
from mcp_memoryrouter.mcp_server.server import build_server

ROOT = Path(__file__).resolve().parents[2]
BUDGET = ResultBudget(10_000)


def _binder(policy: ScopePolicy) -> Binder:
    return Binder(VaultClient("http://127.0.0.1:9"), policy, BUDGET)  # never called


def test_every_tool_and_resource_has_exactly_one_entry_and_vice_versa() -> None:
    policy = load_policy(ROOT / "scopes.yaml")
    build_server(_binder(policy))  # raises when either side has something the other lacks
    assert set(policy.descriptions) == set(ALL_SCOPES)
    assert policy.for_tool("delete_memories") == "memories:delete"
    assert policy.for_tool("commit_reflections") == "memories:reflect"


def test_the_packaged_policy_is_the_top_level_file() -> None:
    assert load_policy() == load_policy(ROOT / "scopes.yaml")


def test_a_tool_without_an_entry_stops_the_server() -> None:
    text = (ROOT / "scopes.yaml").read_text().replace("  fetch: memories:read\n", "")
    with pytest.raises(PolicyError, match="fetch"):
        build_server(_binder(parse_policy(text)))


def test_an_entry_without_a_tool_stops_the_server() -> None:
    text = (
        (ROOT / "scopes.yaml")
        .read_text()
        .replace("tools:\n", "tools:\n  teleport_memories: memories:write\n")
    )
    with pytest.raises(PolicyError, match="teleport_memories"):
        build_server(_binder(parse_policy(text)))


def test_an_unknown_scope_is_refused() -> None:
    text = (
        (ROOT / "scopes.yaml")
        .read_text()
        .replace("search: memories:read", "search: memories:everything")
    )
    with pytest.raises(PolicyError, match="unknown scope"):
        parse_policy(text)


@pytest.mark.parametrize(
    ("entry", "moved"),
    [
        ("store_memory: memories:write", "store_memory: memories:read"),  # a write as a read
        ("search: memories:read", "search: memories:write"),  # a read as a write
        ("delete_memories: memories:delete", "delete_memories: memories:write"),  # not destructive
        ("store_memory: memories:write", "store_memory: memories:delete"),  # destroys nothing
    ],
)
def test_a_tool_whose_hints_disagree_with_its_scope_stops_the_server(
    entry: str, moved: str
) -> None:
    """readOnlyHint is true exactly for the tools that need only memories:read, and
    destructiveHint exactly for those that need memories:delete: hosts ask before a call by
    these hints, so they may not say less than the scope does."""
    text = (ROOT / "scopes.yaml").read_text().replace(entry, moved)
    with pytest.raises(PolicyError, match=moved.split(":")[0]):
        build_server(_binder(parse_policy(text)))
