"""reflect_memories: consolidation by the host's own model, inside the MCP connection.

The MCP SDK's client plays the host, with a sampling callback that plays the model (the
deterministic entries of ``tests/reflect/model_program.py``). Over HTTP on protocol
2026-07-28 the server asks through InputRequiredResult rounds; over stdio on 2025-11-25 it
asks over the connection's back channel; over stateless HTTP on 2025-11-25 it cannot ask,
and says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CreateMessageRequestParams, CreateMessageResult, TextContent

from mcp_memoryrouter import limits
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.reflect.loop import run_triggered
from tests.reflect.model_program import entries
from tests.support.mcp import McpServer, Mode, stdio_server
from tests.support.reflect import contract_rules

pytestmark = pytest.mark.anyio

# ids of every kind the server has: memory uuids, batch ids, keys
ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-|\bcb_|\bmk_", re.IGNORECASE)


class PlayedModel:
    """The sampling callback: records every request, answers entries (or garbage)."""

    def __init__(self, garbage: bool = False) -> None:
        self.requests: list[CreateMessageRequestParams] = []
        self.garbage = garbage

    async def __call__(self, context: Any, params: CreateMessageRequestParams) -> Any:
        self.requests.append(params)
        text = params.messages[0].content
        assert isinstance(text, TextContent)
        answer = "I'd rather not." if self.garbage else json.dumps(entries(text.text))
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=answer), model="played"
        )

    @property
    def prompts(self) -> list[str]:
        texts = [p.messages[0].content for p in self.requests]
        return [t.text for t in texts if isinstance(t, TextContent)]


@asynccontextmanager
async def host(
    server: McpServer, key: str, model: PlayedModel | None, mode: Mode = "auto"
) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http,
        Client(
            streamable_http_client(server.url, http_client=http),
            mode=mode,
            sampling_callback=model,
        ) as client,
    ):
        yield client


def fill(server: McpServer, key: str, messages: int = 1500) -> None:
    """~100k tokens of dated raw memories: a raw debt the server suggests consolidating."""
    base = server.url.removesuffix("/mcp")
    with httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
        for start in range(0, messages, 300):
            batch = [
                {
                    "role": "user",
                    "content": f"Entry {i}: " + f"the garden plan for bed {i % 13} " * 12,
                    "date": f"2026-0{1 + i // 300}-{1 + i // 12 % 28:02d}T{i % 24:02d}:00:00Z",
                }
                for i in range(start, min(messages, start + 300))
            ]
            response = http.post("/v1/memory/ingest", json={"messages": batch})
            assert response.status_code == 202, response.text


def reflections(server: McpServer, key: str) -> list[tuple[str, int, list[str]]]:
    """Every tier-2 reflection as (text, importance, its sources' texts), in date order."""
    base = server.url.removesuffix("/mcp")
    found: list[tuple[str, int, list[str]]] = []
    with httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
        page = http.post(
            "/v1/memory/date-search", json={"from": "2026-01-01", "to": "2026-12-31", "tiers": [2]}
        ).json()
        for row in sorted(page["memories"], key=lambda r: (r["covers"]["from"], r["content"])):
            down = http.post("/v1/memory/inspect", json={"memory_id": row["id"]}).json()
            found.append(
                (row["content"], row["importance"], [s["content"] for s in down["sources"]])
            )
    return found


def leased(server: McpServer) -> int:
    rows = server.service._store._read(  # the lease columns the API does not show
        lambda tx: tx.one("SELECT count(*) FROM memories WHERE lease_batch IS NOT NULL")
    )
    return int(rows[0]) if rows else 0


async def test_the_host_model_consolidates_three_batches_exactly_as_the_loop_would(
    embedded: McpServer,
) -> None:
    sampled_key, looped_key = embedded.new_key(), embedded.new_key()
    fill(embedded, sampled_key)
    fill(embedded, looped_key)
    model = PlayedModel()
    async with host(embedded, sampled_key, model) as client:
        result = await client.call_tool("reflect_memories", {})
    assert not result.is_error, result
    out = result.structured_content
    assert out is not None
    assert (out["batches"], out["stopped"], out["failures"]) == (3, "batch_limit", [])
    assert len(model.requests) == 3  # three batches at most, one question each
    for params, prompt in zip(model.requests, model.prompts, strict=True):
        assert prompt.startswith(contract_rules(1))  # the contract, verbatim
        assert not ID.search(params.model_dump_json())  # no id of any kind
        assert params.max_tokens == limits.SAMPLED_ANSWER_TOKENS
    assert out["reflection"]["suggestion"] is not None  # the debt the run leaves, to go on

    # the loop, run on the same memories with the same model, makes exactly the same vault
    base = embedded.url.removesuffix("/mcp")
    vault = VaultClient(base, looped_key)

    async def played(prompt: str) -> str:
        return json.dumps(entries(prompt))

    try:
        debt = (await vault.stats()).reflection
        report = await run_triggered(vault, played, debt, max_tokens=limits.SAMPLED_BATCH_TOKENS)
    finally:
        await vault.aclose()
    assert report.stopped == "batch_limit" and len(report.batches) == 3
    made = reflections(embedded, sampled_key)
    assert made and made == reflections(embedded, looped_key)
    consolidated = {source for _, _, sources in made for source in sources}
    assert len(consolidated) == out["memories_consolidated"]


@pytest.mark.own_server  # leased() counts every vault's leases
async def test_a_model_answering_garbage_commits_nothing(embedded: McpServer) -> None:
    key = embedded.new_key()
    fill(embedded, key)
    model = PlayedModel(garbage=True)
    async with host(embedded, key, model) as client:
        result = await client.call_tool("reflect_memories", {})
    out = result.structured_content
    assert out is not None and out["stopped"] == "batch_failed"
    assert out["batches"] == 1 and out["reflections_created"] == 0
    assert "InvalidAnswer" in out["failures"][0] and "after one retry" in out["failures"][0]
    assert not ID.search(json.dumps(out))
    assert len(model.requests) == 2  # the question, and its one retry with the error
    assert "The previous answer was rejected" in model.prompts[1]
    assert reflections(embedded, key) == []
    assert leased(embedded) > 0  # the batch waits for its lease to run out, as documented


@pytest.mark.own_server  # leased() counts every vault's leases
async def test_a_client_without_sampling_is_told_to_consolidate_itself(
    embedded: McpServer,
) -> None:
    key = embedded.new_key()
    fill(embedded, key)
    async with host(embedded, key, None) as client:  # 2026-07-28: the protocol's own error
        with pytest.raises(MCPError) as refused:
            await client.call_tool("reflect_memories", {})
    assert refused.value.error.code == -32021
    assert "consolidate_memories" in refused.value.error.message
    assert refused.value.error.data == {"requiredCapabilities": {"sampling": {}}}
    async with host(embedded, key, None, mode="legacy") as client:  # 2025-11-25: a tool error
        result = await client.call_tool("reflect_memories", {})
    assert result.is_error and "consolidate_memories" in str(result.content)
    assert leased(embedded) == 0  # nothing was checked out


@pytest.mark.own_server  # leased() counts every vault's leases
async def test_stateless_http_on_2025_11_25_says_why_it_cannot_ask(embedded: McpServer) -> None:
    key = embedded.new_key()
    fill(embedded, key)
    model = PlayedModel()
    async with host(embedded, key, model, mode="legacy") as client:
        result = await client.call_tool("reflect_memories", {})
    assert result.is_error
    text = str(result.content)
    assert "2026-07-28" in text and "consolidate_memories" in text
    assert model.requests == [] and leased(embedded) == 0


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_over_stdio_both_protocols_ask_the_host_model(tmp_path: Path, mode: str) -> None:
    params, _ = stdio_server(tmp_path, MEMORYROUTER_EMBEDDINGS="none")
    model = PlayedModel()
    async with Client(params, mode=mode, sampling_callback=model) as client:
        for i in range(6):
            text = f"Entry {i}: " + "the garden plan for the spring beds " * 1_400
            stored = await client.call_tool(
                "store_memory", {"content": text, "date": f"2026-02-0{1 + i}"}
            )
            assert not stored.is_error, stored
        result = await client.call_tool("reflect_memories", {})
    assert not result.is_error, result
    out = result.structured_content
    assert out is not None and out["reflections_created"] >= 1 and out["failures"] == []
    assert model.requests and not any(ID.search(p.model_dump_json()) for p in model.requests)


async def test_the_run_waits_sealed_in_the_request_state_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    from mcp_types import InputRequiredResult

    from mcp_memoryrouter.app import create_server
    from mcp_memoryrouter.config import Settings
    from tests.support import live_server

    settings = Settings(data_dir=tmp_path, embeddings="none")
    first = create_server(settings)
    assert first.service is not None
    key, _ = first.service.create_vault()
    model = PlayedModel()
    with live_server(first.app, lifespan="on") as url:
        served = McpServer(url + "/mcp", key, first.service)
        fill(served, key)
        async with host(served, key, model) as client:
            asked = await client.session.call_tool(
                "reflect_memories", {}, allow_input_required=True
            )
            assert isinstance(asked, InputRequiredResult) and asked.request_state
            state = asked.request_state
            # what the client holds reveals nothing: no id, no text of a memory
            assert not ID.search(state) and "garden" not in state
            tampered = state[:-8] + ("A" if state[-8] != "A" else "B") + state[-7:]
            with pytest.raises(MCPError):
                await client.session.call_tool(
                    "reflect_memories",
                    {},
                    input_responses={"reflection": await model(None, _params(asked))},
                    request_state=tampered,
                    allow_input_required=True,
                )
    first.service.close()
    second = create_server(settings)  # a restart: the same data directory, a new process key
    assert second.service is not None
    with live_server(second.app, lifespan="on") as url:
        served = McpServer(url + "/mcp", key, second.service)
        async with host(served, key, model) as client:
            went_on = await client.session.call_tool(
                "reflect_memories",
                {},
                input_responses={"reflection": await model(None, _params(asked))},
                request_state=state,
                allow_input_required=True,
            )
        assert isinstance(went_on, InputRequiredResult)  # batch 1 committed, batch 2 asked
        assert reflections(served, key)
    second.service.close()


def _params(asked: Any) -> CreateMessageRequestParams:
    request = asked.input_requests["reflection"]
    params: CreateMessageRequestParams = request.params
    return params


async def test_a_small_vault_is_below_the_threshold_and_the_answer_says_so(
    embedded: McpServer,
) -> None:
    key = embedded.new_key()
    fill(embedded, key, messages=21)  # a first try: far under the 50,000-token threshold
    model = PlayedModel()
    async with host(embedded, key, model) as client:
        result = await client.call_tool("reflect_memories", {})
    out = result.structured_content
    assert out is not None and not result.is_error
    assert (out["batches"], out["stopped"]) == (0, "below_threshold")
    assert out["reflection"]["unconsolidated"]["raw"]["units"] == 21
    assert model.requests == []
