"""Read-only keys (and the ``:read`` mode) on every write route and every write tool:
403 / a tool error, and nothing written."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import Vault
from tests.support.api import assert_envelope
from tests.support.mcp import text_of
from tests.support.vaults import ENTRY, Owned, tools_for

READ_ROUTES = {
    ("GET", "/healthz"),
    ("GET", "/v1/keys/current"),
    ("GET", "/v1/memory/stats"),
    ("GET", "/v1/memory/timeline"),
    ("GET", "/v1/usage"),
    ("POST", "/v1/memory/search"),
    ("POST", "/v1/memory/prepare"),
    ("POST", "/v1/memory/date-search"),
    ("POST", "/v1/memory/inspect"),
    ("GET", "/v1/memory/export"),
    ("GET", "/v1/memory/consolidate/server"),
}


def write_calls(owned: Owned) -> dict[tuple[str, str], dict[str, Any] | None]:
    return {
        ("POST", "/v1/keys"): {"name": "escalate"},
        ("GET", "/v1/keys"): None,  # lists keys: for read-write keys only
        ("DELETE", "/v1/keys/{key_id}"): None,
        ("POST", "/v1/memory/import-consolidated"): {"ids": owned.raw_ids},
        ("POST", "/v1/memory/ingest"): {"messages": [{"content": "sneaked in"}]},
        ("POST", "/v1/memory/consolidate/checkout"): {"tier": 1},
        ("POST", "/v1/memory/consolidate/commit"): {
            "batch_id": owned.open_batch,
            "entries": [ENTRY],
        },
        ("POST", "/v1/memory/import-reflections"): {
            "tier": 3,
            "entries": [ENTRY],
            "source_ids": [owned.reflection_id],
        },
        ("POST", "/v1/memory/delete-ids"): {"ids": owned.raw_ids},
        ("DELETE", "/v1/memory"): None,
        ("POST", "/v1/memory/consolidate/run"): {},
        ("POST", "/v1/memory/consolidate/server"): {"enabled": False},
    }


def routes(vault: Vault) -> set[tuple[str, str]]:
    """Every operation the OpenAPI document publishes."""
    paths: dict[str, dict[str, Any]] = vault.http.get("/openapi.json").json()["paths"]
    return {(method.upper(), path) for path, item in paths.items() for method in item}


def test_every_route_is_either_a_read_or_a_checked_write(vault: Vault, owned: Owned) -> None:
    """A new route must be added to one list or the other."""
    assert routes(vault) == READ_ROUTES | set(write_calls(owned))


@pytest.mark.parametrize("how", ["read-only key", ":read mode"])
def test_read_only_keys_are_403_on_every_write_route_and_write_nothing(
    vault: Vault, owned: Owned, how: str
) -> None:
    if how == "read-only key":
        minted = vault.post("/v1/keys", {"name": "viewer", "read_only": True})
        key = minted.json()["key"]
    else:
        key = vault.key + ":read"
    own_key_id = vault.http.get("/v1/keys", headers=vault.headers()).json()["keys"][0]["id"]
    before = vault.dump()
    for (method, route), body in write_calls(owned).items():
        path = route.replace("{key_id}", own_key_id)
        response = vault.http.request(method, path, json=body, headers=vault.headers(key))
        assert_envelope(response, 403, "forbidden")
    assert vault.dump() == before
    # and the key still reads
    assert vault.post("/v1/memory/search", {"query": "Zanzibar"}, key).status_code == 200


WRITE_TOOLS: list[tuple[str, dict[str, Any]]] = [
    ("store_memory", {"content": "sneaked in"}),
    ("consolidate_memories", {"tier": 1}),
    ("commit_reflections", {"batch_id": "<open>", "entries": [ENTRY]}),
    ("delete_memories", {"ids": ["<raw>"]}),
    ("forget_all_memories", {"confirmation": "DELETE ALL MEMORIES"}),
]


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["read-only key", ":read mode"])
async def test_read_only_keys_get_a_scope_error_from_every_write_tool_and_write_nothing(
    vault: Vault, owned: Owned, how: str
) -> None:
    if how == "read-only key":
        key = vault.post("/v1/keys", {"name": "viewer", "read_only": True}).json()["key"]
    else:
        key = vault.key + ":read"
    before = vault.dump()
    async with tools_for(vault, key) as client:
        for tool, arguments in WRITE_TOOLS:
            filled = {
                name: (
                    [owned.raw_ids[0]]
                    if value == ["<raw>"]
                    else owned.open_batch
                    if value == "<open>"
                    else value
                )
                for name, value in arguments.items()
            }
            result = await client.call_tool(tool, filled)
            assert result.is_error, tool
            assert "insufficient_scope" in text_of(result), text_of(result)
        assert not (await client.call_tool("memory_status", {})).is_error
    assert vault.dump() == before
