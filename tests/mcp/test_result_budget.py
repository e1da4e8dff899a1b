"""Every tool result stays within MEMORYROUTER_MCP_RESULT_TOKENS on a large vault: the SDK's
own client against a real server over 5,000 long memories with reflections."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from mcp_memoryrouter import schemas
from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.tokens import est_tokens
from tests.support import live_server

pytestmark = pytest.mark.anyio
MEMORIES = 5_000
TOPICS = ["billing", "postgres", "latency", "budget", "office", "lisbon", "deploy", "roadmap"]
FILLER = ["the", "team", "decided", "to", "migrate", "review", "design", "schema", "cache"]


@dataclass
class BigVault:
    data_dir: Path
    key: str
    reflection: str  # a tier 2 reflection over a whole 50,000-token batch
    raw: str


def long_text(rng: random.Random, n: int) -> str:
    topic = TOPICS[n % len(TOPICS)]
    words = [rng.choice(FILLER) for _ in range(260)]
    return f"Note {n} about {topic}: " + " ".join(words)  # ~1,700 characters, one memory


def settings(data_dir: Path, **extra: Any) -> Settings:
    return Settings(data_dir=data_dir, embeddings="none", rate_limit_per_minute=0, **extra)


@asynccontextmanager
async def rest(url: str, key: str) -> AsyncIterator[VaultClient]:
    async with httpx2.AsyncClient(base_url=url, timeout=120) as http:
        yield VaultClient(url, key, http=http)


async def fill(url: str, key: str) -> tuple[str, str]:
    rng = random.Random(7)
    async with rest(url, key) as vault:
        for start in range(0, MEMORIES, 250):
            messages = [
                schemas.MessageIn(
                    role="user",
                    content=long_text(rng, n),
                    date=f"2026-{1 + n * 9 // MEMORIES:02d}-{1 + n % 28:02d}T10:00:00Z",
                )
                for n in range(start, start + 250)
            ]
            await vault.ingest(schemas.IngestRequest(messages=messages))
        for n in range(3):
            batch = await vault.checkout(schemas.CheckoutRequest(tier=1))
            assert batch.batch_id is not None and batch.count > 100
            entry = schemas.EntryIn(text=f"Reflection {n}: " + long_text(rng, n), importance=7)
            await vault.commit(schemas.CommitRequest(batch_id=batch.batch_id, entries=[entry]))
        tier2 = await vault.search(schemas.SearchRequest(query="Reflection", tiers=[2], limit=1))
        raw = await vault.search(schemas.SearchRequest(query="billing", tiers=[1], limit=1))
    return tier2.memories[0].id, raw.memories[0].id


@pytest.fixture(scope="module")
def big_vault(tmp_path_factory: pytest.TempPathFactory) -> BigVault:
    data_dir = tmp_path_factory.mktemp("big")
    server = create_server(settings(data_dir))
    assert server.service is not None
    key, _ = server.service.create_vault()
    with live_server(server.app, lifespan="on") as url:
        reflection, raw = anyio.run(fill, url, key)
    return BigVault(data_dir, key, reflection, raw)


@asynccontextmanager
async def mcp_client(vault: BigVault, budget: int) -> AsyncIterator[Client]:
    async with both_sides(vault, budget) as (client, _):
        yield client


@asynccontextmanager
async def both_sides(vault: BigVault, budget: int) -> AsyncIterator[tuple[Client, str]]:
    """An MCP client of a server with this result budget, and the server's base URL."""
    server = create_server(settings(vault.data_dir, mcp_result_tokens=budget))
    headers = {"Authorization": f"Bearer {vault.key}"}
    with live_server(server.app, lifespan="on") as url:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            Client(streamable_http_client(url + "/mcp", http_client=http)) as client,
        ):
            yield client, url


def tokens(result: Any) -> int:
    """The estimate of what the host receives: the whole result, as JSON."""
    return est_tokens(result.model_dump_json(by_alias=True, exclude_none=True))


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def default_calls(vault: BigVault) -> dict[str, dict[str, Any]]:
    return {
        "search_memories": {"query": "billing postgres"},
        "date_search_memories": {"from_date": "2026-01-01"},
        "inspect_memory": {"memory_id": vault.reflection},
        "memory_status": {},
        "search": {"query": "billing postgres"},
        "fetch": {"id": vault.reflection},
        "store_memory": {"content": "The retro moved to Friday."},
        "delete_memories": {"ids": ["not-a-memory"]},
        "forget_all_memories": {"confirmation": "no"},
    }


async def assert_every_result_within(vault: BigVault, budget: int) -> dict[str, int]:
    sizes: dict[str, int] = {}
    async with mcp_client(vault, budget) as client:
        for name, arguments in default_calls(vault).items():
            sizes[name] = tokens(await client.call_tool(name, arguments))
        checkout = await client.call_tool("consolidate_memories", {})
        sizes["consolidate_memories"] = tokens(checkout)
        if not checkout.is_error:
            batch = ok(checkout)
            entries = [{"text": "The team kept notes on many topics.", "importance": 5}]
            commit = await client.call_tool(
                "commit_reflections", {"batch_id": batch["batch_id"], "entries": entries}
            )
            ok(commit)
            sizes["commit_reflections"] = tokens(commit)
        for uri in ("memory://vault/stats", "memory://vault/recent"):
            text = (await client.read_resource(uri)).contents[0].text  # type: ignore[union-attr]
            sizes[uri] = est_tokens(text)
    over = {name: size for name, size in sizes.items() if size > budget}
    assert over == {}, f"over the {budget}-token budget: {over}"
    return sizes


async def test_every_tool_result_with_default_arguments_fits_the_default_budget(
    big_vault: BigVault,
) -> None:
    sizes = await assert_every_result_within(big_vault, 10_000)
    assert "commit_reflections" in sizes  # the batch fitted with its contract
    # the budget is used, not avoided: the long answers fill most of it
    assert sizes["search_memories"] > 2_000 and sizes["inspect_memory"] > 5_000


async def test_a_smaller_budget_is_a_setting_every_result_honours(big_vault: BigVault) -> None:
    await assert_every_result_within(big_vault, 2_000)
    async with mcp_client(big_vault, 2_000) as client:
        refused = await client.call_tool("consolidate_memories", {})
    assert refused.is_error  # even the smallest batch and its contract do not fit
    text = refused.content[0].text  # type: ignore[union-attr]
    assert "MEMORYROUTER_MCP_RESULT_TOKENS" in text and "raise it to at least" in text


async def test_consolidation_checks_out_a_batch_that_fits_with_its_contract(
    big_vault: BigVault,
) -> None:
    async with mcp_client(big_vault, 7_000) as client:
        batch = ok(await client.call_tool("consolidate_memories", {}))
        small = ok(await client.call_tool("consolidate_memories", {"max_tokens": 1_000}))
        large = await client.call_tool("consolidate_memories", {"max_tokens": 200_000})
    assert batch["count"] >= 2 and batch["reflection_contract"]["target_tier"] == 2
    assert sum(est_tokens(m["text"]) for m in small["memories"]) <= 1_000
    assert tokens(large) <= 7_000 and ok(large)["count"] >= 2  # capped to the budget


async def test_search_trims_long_texts_with_a_marker_and_counts_what_it_left_out(
    big_vault: BigVault,
) -> None:
    async with mcp_client(big_vault, 10_000) as client:
        result = await client.call_tool("search_memories", {"query": "billing", "limit": 250})
        found = ok(result)
        recent = await client.read_resource("memory://vault/recent")
    assert tokens(result) <= 10_000
    assert found["omitted"] > 0 and len(found["memories"]) + found["omitted"] == 250
    first = found["memories"][0]
    assert (
        f"more characters; inspect_memory {first['id']} returns the whole text]"
        in (first["content"])
    )
    newest = json.loads(recent.contents[0].text)  # type: ignore[union-attr]
    assert set(newest) == {"memories", "omitted"}


async def test_inspect_pages_a_large_batch_by_the_budget_and_reads_on(
    big_vault: BigVault,
) -> None:
    async with mcp_client(big_vault, 10_000) as client:
        first = ok(await client.call_tool("inspect_memory", {"memory_id": big_vault.reflection}))
        offset = first["next_offset"]
        second = ok(
            await client.call_tool(
                "inspect_memory", {"memory_id": big_vault.reflection, "offset": offset}
            )
        )
    assert first["truncated"] is True and 0 < len(first["sources"]) < first["sources_total"]
    assert offset == len(first["sources"]) < 500
    assert second["offset"] == offset
    assert {s["id"] for s in first["sources"]}.isdisjoint(s["id"] for s in second["sources"])
    # no vectors in this vault ("none" embeddings): no scores, sources in date order
    assert all(s["score"] is None for s in first["sources"])


async def test_the_rest_checkout_keeps_its_documented_50000_token_default(
    big_vault: BigVault,
) -> None:
    async with both_sides(big_vault, 7_000) as (client, url):
        over_mcp = ok(await client.call_tool("consolidate_memories", {}))
        async with rest(url, big_vault.key) as vault:
            batch = await vault.checkout(schemas.CheckoutRequest(tier=1))
    assert sum(est_tokens(m["text"]) for m in over_mcp["memories"]) < 7_000
    assert 45_000 < sum(est_tokens(m.text) for m in batch.memories or []) <= 50_000


@pytest.mark.parametrize("budget", [10_000, 2_000])
async def test_date_pages_cut_to_the_budget_visit_every_row_once(
    big_vault: BigVault, budget: int
) -> None:
    window = {"from_date": "2026-03-01", "to_date": "2026-03-03T23:59:59Z"}
    async with both_sides(big_vault, budget) as (client, url):
        async with rest(url, big_vault.key) as vault:
            body = schemas.DateSearchRequest.model_validate(
                {"from": window["from_date"], "to": window["to_date"], "max_tokens": 200_000}
            )
            everything = [m.id for m in (await vault.date_search(body)).memories]
        shown: list[str] = []
        omitted = 0
        for _ in range(len(everything) + 1):
            page = ok(await client.call_tool("date_search_memories", window))
            shown += [m["id"] for m in page["memories"]]
            omitted += page["omitted"]
            if not page["truncated"]:
                break
            window = {**window, "to_date": page["returned"]["from"]}
    assert page["truncated"] is False  # paging ended
    assert len(shown) == len(set(shown)) and set(shown) <= set(everything)
    assert len(shown) + omitted == len(everything) > 20


def test_the_budget_is_the_setting_memoryrouter_mcp_result_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMORYROUTER_MCP_RESULT_TOKENS", "3000")
    assert Settings().mcp_result_tokens == 3_000
    monkeypatch.setenv("MEMORYROUTER_MCP_RESULT_TOKENS", "500")
    with pytest.raises(ValueError, match="mcp_result_tokens"):
        Settings()


async def test_a_dry_run_of_a_long_derived_delete_lists_what_fits_and_counts_the_rest(
    big_vault: BigVault,
) -> None:
    import sqlite3

    conn = sqlite3.connect(big_vault.data_dir / "vault.sqlite3")
    try:
        ids = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM memories WHERE tier = 1 AND consolidated = 1 ORDER BY seq LIMIT 300"
            )
        ]
        marks = ", ".join("?" * len(ids))
        [(parents,)] = conn.execute(
            f"SELECT count(DISTINCT parent_id) FROM lineage WHERE child_id IN ({marks})", ids
        )
    finally:
        conn.close()
    assert len(ids) == 300 and parents >= 1
    for budget in (10_000, 2_000):
        async with mcp_client(big_vault, budget) as client:
            result = await client.call_tool(
                "delete_memories", {"ids": ids, "derived": True, "dry_run": True}
            )
        assert tokens(result) <= budget
        out = ok(result)
        shown = sum(len(v) for v in out["by_tier"].values())
        assert out["dry_run"] is True and (out["ids_omitted"] > 0) == (budget == 2_000)
        assert shown + out["ids_omitted"] == len(ids) + parents  # the ids and reflections above
