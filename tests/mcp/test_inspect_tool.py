"""inspect_memory over MCP: the evidence first. A reflection's sources most similar to it
come first, each with its score; sources without a vector yet come last with score null."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from mcp.client import Client

from mcp_memoryrouter.auth.scopes import load_policy
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.mcp_server.binding import Binder
from mcp_memoryrouter.mcp_server.budget import ResultBudget
from mcp_memoryrouter.mcp_server.server import build_server
from mcp_memoryrouter.vault.search.embeddings import Embedders
from tests.support import Vault
from tests.support.api import checkout, commit
from tests.vault.embedders import ConceptEmbedder

pytestmark = pytest.mark.anyio
BATCH = [  # oldest first: the evidence for the reflection is the second and the fourth
    ("lunch with a physician", "concepts"),
    ("my car broke down on the road", "concepts"),
    ("the kitten slept all day", "none"),  # stored without a vector
    ("bought a used automobile at last", "concepts"),
    ("a glad afternoon in berlin", "concepts"),
]


@pytest.fixture
def vault_embedders() -> Embedders:
    return Embedders({"concepts": ConceptEmbedder}, "concepts")


async def inspect(vault: Vault, memory_id: str) -> dict[str, Any]:
    client = VaultClient("http://vault.internal", transport=httpx2.ASGITransport(app=vault.app))
    server = build_server(Binder(client, load_policy(), ResultBudget(10_000), vault.key))
    try:
        async with Client(server) as mcp:
            result = await mcp.call_tool("inspect_memory", {"memory_id": memory_id})
    finally:
        await client.aclose()
    assert not result.is_error, result.content
    found: dict[str, Any] | None = result.structured_content
    assert found is not None
    return found


async def test_inspect_memory_lists_the_evidence_first_with_its_score(vault: Vault) -> None:
    for day, (text, embeddings) in enumerate(BATCH, start=1):
        vault.ingest(text, date=f"2026-03-0{day}T09:00:00Z", embeddings=embeddings)
    batch = checkout(vault)
    entry = {"text": "The car broke down and an automobile was bought.", "importance": 6}
    top = commit(vault, batch["batch_id"], [entry]).json()["created"][0]["id"]
    vault.worker.drain()
    sources = (await inspect(vault, top))["sources"]
    contents = [s["content"] for s in sources]
    assert set(contents[:2]) == {BATCH[1][0], BATCH[3][0]}
    assert contents[-1] == BATCH[2][0] and sources[-1]["score"] is None
    scores = [s["score"] for s in sources[:-1]]
    assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)


async def call(vault: Vault, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    client = VaultClient("http://vault.internal", transport=httpx2.ASGITransport(app=vault.app))
    server = build_server(Binder(client, load_policy(), ResultBudget(10_000), vault.key))
    try:
        async with Client(server) as mcp:
            result = await mcp.call_tool(tool, arguments)
    finally:
        await client.aclose()
    assert not result.is_error, result.content
    found: dict[str, Any] | None = result.structured_content
    assert found is not None
    return found


async def test_inspect_memory_marks_the_reflections_own_evidence_and_weak_support(
    vault: Vault,
) -> None:
    for day, (text, embeddings) in enumerate(BATCH, start=1):
        vault.ingest(text, date=f"2026-03-0{day}T09:00:00Z", embeddings=embeddings)
    batch = checkout(vault)
    entries = [
        {"text": "The car broke down and an automobile was bought.", "importance": 6},
        {"text": "Quarterly taxes were filed with the accountant.", "importance": 4},
    ]
    supported, unsupported = (
        c["id"] for c in commit(vault, batch["batch_id"], entries).json()["created"]
    )
    found = await call(vault, "inspect_memory", {"memory_id": supported})
    assert found["evidence_total"] == 2 and found.get("weak_support") is None
    marks = [s["evidence"] for s in found["sources"]]
    assert [m["rank"] for m in marks[:2]] == [1, 2] and marks[2:] == [None] * 3
    assert (await call(vault, "inspect_memory", {"memory_id": unsupported}))["weak_support"]


async def test_delete_memories_follows_evidence_and_its_dry_run_shows_both_choices(
    vault: Vault,
) -> None:
    for day, (text, embeddings) in enumerate(BATCH, start=1):
        vault.ingest(text, date=f"2026-03-0{day}T09:00:00Z", embeddings=embeddings)
    batch = checkout(vault)
    entries = [
        {"text": "The car broke down and an automobile was bought.", "importance": 6},
        {"text": "A glad afternoon in Berlin.", "importance": 4},
    ]
    car, berlin = (c["id"] for c in commit(vault, batch["batch_id"], entries).json()["created"])
    source = batch["source_ids"][1]  # the car that broke down
    arguments = {"ids": [source], "derived": "evidence", "dry_run": True}
    planned = await call(vault, "delete_memories", arguments)
    assert planned["by_tier"] == {"1": [source], "2": [car]}
    # the choices list what goes above the ids' own tier (the ids go either way)
    assert planned["choices"]["lineage"]["by_tier"] == {"2": sorted([car, berlin])}
    assert planned["choices"]["evidence"]["by_tier"] == {"2": [car]}
    done = await call(vault, "delete_memories", {"ids": [source], "derived": "evidence"})
    assert done["deleted"] == 2
    assert [r[0] for r in vault.sql("SELECT id FROM memories WHERE tier = 2")] == [berlin]
