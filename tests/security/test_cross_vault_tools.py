"""Another vault's ids through every MCP tool that takes one: the same tool error as an
unknown id; and no tool shows anything of another vault."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from mcp_memoryrouter.vault.rules.domain import new_batch_id
from tests.support import Vault
from tests.support.mcp import text_of
from tests.support.vaults import ENTRY, Owned, tools_for

pytestmark = pytest.mark.anyio

Arguments = Callable[[str], dict[str, Any]]
ID_TOOLS: list[tuple[str, Arguments]] = [
    ("inspect_memory", lambda i: {"memory_id": i}),
    ("fetch", lambda i: {"id": i}),
    ("delete_memories", lambda i: {"ids": [i]}),
]


@pytest.mark.parametrize(("tool", "arguments"), ID_TOOLS, ids=[t[0] for t in ID_TOOLS])
async def test_another_vaults_ids_answer_like_unknown_ids_in_every_tool(
    vault: Vault, owned: Owned, tool: str, arguments: Arguments
) -> None:
    intruder = vault.new_key()
    async with tools_for(vault, intruder) as client:
        for theirs in [*owned.raw_ids, owned.reflection_id]:
            unknown = str(uuid.uuid4())
            mine = await client.call_tool(tool, arguments(theirs))
            never = await client.call_tool(tool, arguments(unknown))
            assert mine.is_error == never.is_error
            assert text_of(mine).replace(theirs, "<id>") == text_of(never).replace(unknown, "<id>")
            assert mine.structured_content == never.structured_content
            for text in owned.texts:
                assert text not in text_of(mine)
    for memory_id in [*owned.raw_ids, owned.reflection_id]:
        assert vault.post("/v1/memory/inspect", {"memory_id": memory_id}).status_code == 200


@pytest.mark.parametrize("which", ["open", "committed"])
async def test_another_vaults_batch_answers_like_an_unknown_batch(
    vault: Vault, owned: Owned, which: str
) -> None:
    theirs = owned.open_batch if which == "open" else owned.committed_batch
    unknown = new_batch_id()
    async with tools_for(vault, vault.new_key()) as client:
        mine = await client.call_tool(
            "commit_reflections", {"batch_id": theirs, "entries": [ENTRY]}
        )
        never = await client.call_tool(
            "commit_reflections", {"batch_id": unknown, "entries": [ENTRY]}
        )
    assert mine.is_error and never.is_error
    assert text_of(mine).replace(theirs, "<id>") == text_of(never).replace(unknown, "<id>")


READS: list[tuple[str, dict[str, Any]]] = [
    ("search_memories", {"query": "Zanzibar Quokka Xylophone database", "limit": 250}),
    ("search_memories", {"query": "Zanzibar", "from_date": "1970-01-01"}),
    ("date_search_memories", {"from_date": "1970-01-01"}),
    ("date_search_memories", {"from_date": "1970-01-01", "query": "Quokka"}),
    ("search", {"query": "Zanzibar Quokka"}),
    ("memory_status", {}),
    ("consolidate_memories", {"tier": 1}),
    ("consolidate_memories", {"tier": 2}),
]


async def test_no_tool_shows_anything_of_another_vault(vault: Vault, owned: Owned) -> None:
    intruder = vault.new_key()
    vault.ingest("An unrelated note in the intruder's own vault.", key=intruder)
    owner_ref = vault.http.get("/v1/keys/current", headers=vault.headers()).json()["vault"]
    secrets = [*owned.texts, *owned.raw_ids, owned.reflection_id, owner_ref, vault.key]
    secrets += [owned.open_batch, owned.committed_batch]
    async with tools_for(vault, intruder) as client:
        for tool, arguments in READS:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, text_of(result)
            for secret in secrets:
                assert secret not in text_of(result), (tool, secret)
                assert secret not in str(result.structured_content), (tool, secret)


async def test_forgetting_everything_in_one_vault_leaves_the_other_whole(
    vault: Vault, owned: Owned
) -> None:
    async with tools_for(vault, vault.new_key()) as client:
        result = await client.call_tool(
            "forget_all_memories", {"confirmation": "DELETE ALL MEMORIES"}
        )
    assert result.structured_content == {"deleted": 0}
    stats = vault.http.get("/v1/memory/stats", headers=vault.headers()).json()
    assert stats["total_memories"] == len(owned.raw_ids) + 1
