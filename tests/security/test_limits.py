"""Request size limits and the rate limit through the full server (REST and /mcp)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.edge.ratelimit import TokenBuckets
from mcp_memoryrouter.vault.service import VaultService
from tests.support import live_server, rate_limits
from tests.support.api import assert_envelope
from tests.support.mcp import text_of

MIB = 1024 * 1024


@dataclass
class Running:
    url: str
    key: str


@dataclass
class Served:
    """One server for the module's tests of the same settings; each test has a vault."""

    url: str
    service: VaultService
    limits: list[TokenBuckets]


def serve(data_dir: Path, per_minute: int = 600, burst: int | None = None) -> Iterator[Served]:
    settings = Settings(
        data_dir=data_dir,
        embeddings="none",
        rate_limit_per_minute=per_minute,
        rate_limit_burst=burst,
    )
    server = create_server(settings)
    assert server.service is not None
    with live_server(server.app, lifespan="on") as url:
        yield Served(url, server.service, rate_limits(server.app))


def running_on(served: Served) -> Iterator[Running]:
    """The module's server with a vault of the test's own, every rate limit full again after."""
    key, _ = served.service.create_vault()
    yield Running(served.url, key)
    for buckets in served.limits:
        buckets._buckets.clear()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from serve(tmp_path_factory.mktemp("limits"))


@pytest.fixture(scope="module")
def served_throttled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from serve(tmp_path_factory.mktemp("throttled"), per_minute=1, burst=3)


@pytest.fixture
def running(served: Served) -> Iterator[Running]:
    yield from running_on(served)


@pytest.fixture
def throttled(served_throttled: Served) -> Iterator[Running]:
    """Three requests per key, then one a minute: no test waits that long."""
    yield from running_on(served_throttled)


def ingest_body(size: int) -> bytes:
    filler = "x" * (size - 60)
    return f'{{"messages": [{{"content": "{filler}"}}]}}'.encode()


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_rest_bodies_over_one_mib_are_413_through_the_full_server(
    running: Running, chunked: bool
) -> None:
    body = ingest_body(MIB + 100)

    def pieces() -> Iterator[bytes]:
        for start in range(0, len(body), 65_536):
            yield body[start : start + 65_536]

    headers = {"X-Memory-Key": running.key, "Content-Type": "application/json"}
    response = httpx2.post(
        running.url + "/v1/memory/ingest",
        content=pieces() if chunked else body,
        headers=headers,
        timeout=30,
    )
    assert_envelope(response, 413, "payload_too_large")
    stats = httpx2.get(running.url + "/v1/memory/stats", headers=headers, timeout=30).json()
    assert stats["total_memories"] == 0


def test_a_rest_body_just_under_one_mib_is_accepted(running: Running) -> None:
    headers = {"X-Memory-Key": running.key, "Content-Type": "application/json"}
    body = ingest_body(MIB - 1000)
    response = httpx2.post(
        running.url + "/v1/memory/ingest", content=body, headers=headers, timeout=30
    )
    assert response.status_code == 202, response.text


def test_json_nested_past_the_parsers_depth_is_400_on_rest(running: Running) -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    headers = {"X-Memory-Key": running.key, "Content-Type": "application/json"}
    response = httpx2.post(
        running.url + "/v1/memory/search", content=body, headers=headers, timeout=30
    )
    assert_envelope(response, 400, "invalid_request")


def test_rest_past_the_budget_is_429_with_retry_after(throttled: Running) -> None:
    headers = {"X-Memory-Key": throttled.key}
    statuses = [
        httpx2.get(throttled.url + "/v1/memory/stats", headers=headers).status_code
        for _ in range(3)
    ]
    assert statuses == [200, 200, 200]
    response = httpx2.get(throttled.url + "/v1/memory/stats", headers=headers)
    assert_envelope(response, 429, "rate_limited")
    assert 1 <= int(response.headers["retry-after"]) <= 60


@pytest.mark.anyio
async def test_a_throttled_tool_call_is_a_rate_limited_tool_error(throttled: Running) -> None:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {throttled.key}"}) as http,
        Client(streamable_http_client(throttled.url + "/mcp", http_client=http)) as client,
    ):
        results = [await client.call_tool("search_memories", {"query": "x"}) for _ in range(4)]
    errors = [text_of(r) for r in results if r.is_error]
    assert errors, "the fourth call at the latest is past the budget"
    assert all("rate_limited" in text for text in errors), errors
    assert not results[0].is_error


@pytest.mark.anyio
async def test_mcp_authentication_is_not_spent_from_an_exhausted_budget(
    throttled: Running,
) -> None:
    headers = {"Authorization": f"Bearer {throttled.key}"}
    for _ in range(3):
        httpx2.get(throttled.url + "/v1/memory/stats", headers=headers)
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(throttled.url + "/mcp", http_client=http)) as client,
    ):
        result = await client.call_tool("search_memories", {"query": "x"})
    assert result.is_error
    assert "rate_limited" in text_of(result)
