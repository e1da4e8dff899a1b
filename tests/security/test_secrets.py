"""Keys never appear in logs or responses: a whole session through the full server (REST
and /mcp, successes and failed authentication), logs captured at DEBUG from every logger."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.config import Settings
from tests.support import live_server

pytestmark = pytest.mark.anyio
WINDOW = 12  # no run of this many characters of a key's secret part may show


def fragments(key: str) -> Iterator[str]:
    secret = key.removeprefix("mk_")
    for start in range(len(secret) - WINDOW + 1):
        yield secret[start : start + WINDOW]


def assert_hidden(keys: list[str], text: str) -> None:
    for key in keys:
        for fragment in fragments(key):
            assert fragment not in text, f"a fragment of a key shows: …{fragment}…"


class Transcript:
    """Every response body and header the session received."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    async def record(self, response: httpx2.Response) -> None:
        await response.aread()
        self.parts += [str(response.status_code), str(response.headers), response.text]

    def text(self) -> str:
        return "\n".join(self.parts)


async def rest_session(url: str, key: str, look_alike: str, transcript: Transcript) -> None:
    hooks = {"response": [transcript.record]}
    async with httpx2.AsyncClient(base_url=url, event_hooks=hooks) as http:
        auth = {"Authorization": f"Bearer {key}"}
        await http.post(
            "/v1/memory/ingest",
            json={"messages": [{"content": "We chose Postgres.", "date": "2026-02-01"}]},
            headers={"X-Memory-Key": key},
        )
        await http.post("/v1/memory/search", json={"query": "Postgres"}, headers=auth)
        await http.post("/v1/memory/search", json={"query": "x"}, headers={"x-api-key": key})
        await http.get("/v1/memory/stats", headers={"X-Memory-Key": key + ":read"})
        await http.post("/v1/memory/ingest", json={"messages": []}, headers=auth)  # 400
        await http.post("/v1/memory/ingest", json={"x": 1}, headers={"X-Memory-Key": key + ":read"})
        await http.post("/v1/memory/inspect", json={"memory_id": "unknown"}, headers=auth)
        await http.post("/v1/memory/search", json={"query": "x"}, headers={"x-api-key": look_alike})
        await http.post(
            "/v1/memory/search", json={"query": "x"}, headers={"Authorization": f"Basic {key}"}
        )
        await http.post(
            "/v1/memory/search", json={"query": "x"}, headers={"X-Memory-Key": key + ":admin"}
        )
        await http.get("/v1/memory/stats")  # no key at all
        await http.post("/v1/keys", json={"name": "second"}, headers=auth)  # the one key shown


async def mcp_session(url: str, key: str, transcript: Transcript) -> None:
    hooks = {"response": [transcript.record]}
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30, event_hooks=hooks) as http,
        Client(streamable_http_client(url + "/mcp", http_client=http)) as client,
    ):
        await client.list_tools()
        await client.call_tool("store_memory", {"content": "Ana prefers tea."})
        await client.call_tool("store_memory", {"content": f"my memory key is {key}"})
        await client.call_tool("search_memories", {"query": "tea"})
        await client.call_tool("memory_status", {})
        await client.call_tool("inspect_memory", {"memory_id": "unknown"})
        await client.call_tool("fetch", {"id": "nope"})


async def failed_mcp_auth(url: str, look_alike: str, transcript: Transcript) -> None:
    hooks = {"response": [transcript.record]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with httpx2.AsyncClient(event_hooks=hooks) as http:
        for value in [f"Bearer {look_alike}", f"Bearer {look_alike}:read", look_alike]:
            await http.post(url + "/mcp", json=body, headers={"Authorization": value})


async def test_no_key_or_fragment_of_one_shows_in_logs_or_responses(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server = create_server(Settings(data_dir=tmp_path, embeddings="none"))
    assert server.service is not None
    key, _ = server.service.create_vault()
    look_alike = key[:-1] + ("A" if key[-1] != "A" else "B")  # one character off
    transcript = Transcript()
    with live_server(server.app, lifespan="on") as url:
        await rest_session(url, key, look_alike, transcript)
        await mcp_session(url, key, transcript)
        await failed_mcp_auth(url, look_alike, transcript)
    minted = [p for p in transcript.parts if '"key":"mk_' in p.replace(" ", "")]
    assert len(minted) == 1  # POST /v1/keys shows its new key once, and nothing else does
    shown = transcript.text().replace(minted[0], "")
    assert_hidden([key, look_alike], shown)
    # the test's own MCP client logs, at DEBUG, the messages it sends (one carries the key
    # on purpose); everything the server side logs is checked
    server_side = [r for r in caplog.records if not r.name.startswith("mcp.client")]
    logs = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in server_side)
    assert any(r.name.startswith("mcp.server") for r in server_side)
    assert any(r.levelno == logging.DEBUG for r in server_side)
    assert_hidden([key, look_alike], logs)
