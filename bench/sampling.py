"""Consolidation inside the MCP connection: reflect_memories beside the model driving it.

    python bench/sampling.py [--memories 1500] [--runs 5]

A real ``mcp-memoryrouter serve`` process (SQLite, no embeddings) and the MCP SDK's client on
protocol 2026-07-28, whose sampling callback plays the model with deterministic entries
(``tests/reflect/model_program.py``). Each run fills a fresh vault with ``--memories`` dated
raw memories (~100 tokens each: a raw debt the server suggests consolidating), then
consolidates three batches either way:

- **reflect_memories**: one tool call; the server asks the client's model once per batch
  (InputRequiredResult rounds, the run sealed into the request state between rounds);
- **the model driving**: ``consolidate_memories`` then ``commit_reflections``, three times, the
  model writing the entries between the calls (what a chat model does today), on batches
  of the same size (12,000 tokens).

Printed: server CPU per consolidated batch (user + system of the server process, from /proc),
the calls the client makes, the bytes the client sends and receives for them, and the model
input per batch, medians over the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CreateMessageRequestParams, CreateMessageResult, TextContent

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, new_vault, server, table
from bench.load import cpu_seconds, server_pid
from mcp_memoryrouter import limits
from tests.reflect.model_program import entries


class Wire:
    """Bytes and POSTs the client exchanges with /mcp."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.sent = self.received = self.posts = 0

    async def request(self, request: httpx2.Request) -> None:
        self.posts += 1
        self.sent += len(request.content)

    async def response(self, response: httpx2.Response) -> None:
        await response.aread()
        self.received += len(response.content)


def fill(base: str, key: str, count: int) -> None:
    with httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
        for start in range(0, count, 300):
            batch = [
                {
                    "role": "user",
                    "content": f"Entry {i}: " + f"the garden plan for bed {i % 13} " * 12,
                    "date": f"2026-0{1 + i // 300}-{1 + i // 12 % 28:02d}T{i % 24:02d}:00:00Z",
                }
                for i in range(start, min(count, start + 300))
            ]
            assert http.post("/v1/memory/ingest", json={"messages": batch}).status_code == 202


async def one_run(url: str, key: str, how: str) -> dict[str, float]:
    wire = Wire()
    prompts: list[int] = []

    async def model(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        text = params.messages[0].content
        assert isinstance(text, TextContent)
        prompts.append(len(text.text))
        answer = json.dumps(entries(text.text))
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=answer), model="played"
        )

    pid = server_pid()
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {key}"},
            timeout=120,
            event_hooks={"request": [wire.request], "response": [wire.response]},
        ) as http,
        Client(streamable_http_client(url, http_client=http), sampling_callback=model) as client,
    ):
        await client.list_tools()
        wire.reset()  # count the consolidation only
        before = cpu_seconds(pid)
        batches = memories = 0
        if how == "reflect_memories":
            result = await client.call_tool("reflect_memories", {})
            assert not result.is_error, result
            assert result.structured_content is not None
            batches = result.structured_content["batches"]
            memories = result.structured_content["memories_consolidated"]
        else:
            for _ in range(3):
                got = await client.call_tool(
                    "consolidate_memories", {"max_tokens": limits.SAMPLED_BATCH_TOKENS}
                )
                batch = got.structured_content
                assert batch is not None and batch["batch_id"], got
                lines = "\n".join(f"[{m['date']}] {m['text']}" for m in batch["memories"])
                prompt = f"{batch['reflection_contract']['instructions']}\n\n{lines}\n"
                prompts.append(len(prompt))
                done = await client.call_tool(
                    "commit_reflections",
                    {"batch_id": batch["batch_id"], "entries": entries(prompt)},
                )
                assert not done.is_error, done
                batches += 1
                memories += batch["count"]
        used = cpu_seconds(pid) - before
    return {
        "cpu_ms_per_batch": used * 1000 / max(batches, 1),
        "cpu_ms_per_100": used * 100_000 / max(memories, 1),
        "batches": batches,
        "memories": memories,
        "posts": wire.posts,
        "sent_kb": wire.sent / 1024,
        "received_kb": wire.received / 1024,
        "model_input_kb": statistics.median(prompts) / 1024 if prompts else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1500)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"reflect_memories": [], "model driving": []}
    with tempfile.TemporaryDirectory() as tmp:
        env = {"MEMORYROUTER_EMBEDDINGS": "none", "MEMORYROUTER_MCP_RESULT_TOKENS": "20000"}
        with server(Path(tmp), env) as base:
            for n in range(args.runs):
                for how in results:
                    key = new_vault(Path(tmp), f"{how}-{n}")
                    fill(base, key, args.memories)
                    results[how].append(asyncio.run(one_run(base + "/mcp", key, how)))
    rows = []
    for how, runs in results.items():

        def med(field: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(r[field] for r in runs)

        rows.append(
            [
                how,
                f"{med('batches'):.0f} / {med('memories'):.0f}",
                f"{med('cpu_ms_per_batch'):.1f} / {med('cpu_ms_per_100'):.1f}",
                f"{med('posts'):.0f}",
                f"{med('sent_kb'):.0f} / {med('received_kb'):.0f}",
                f"{med('model_input_kb'):.0f}",
            ]
        )
    print(f"code {code_version()}; {args.memories} memories per vault; {args.runs} runs")
    print(
        table(
            [
                "consolidation",
                "batches / memories",
                "server CPU ms / batch / 100 memories",
                "POSTs to /mcp",
                "KiB sent / received",
                "model input KiB / batch",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
