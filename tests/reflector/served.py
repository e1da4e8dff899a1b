"""A server with a reflector, as the tests drive it over HTTP."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.service import VaultService
from tests.reflector.provider import Provider
from tests.support import Clock, live_server

PROVIDER_KEY = "sk-reflector-secret-7d2a91"
START = datetime(2026, 1, 1, tzinfo=UTC)
# 1,100 memories of 200 characters (50 tokens each): past the 50,000-token threshold, and a
# first batch (50,000 tokens) leaves 100 below it
PAST_THRESHOLD = 1_100


def settings(
    data_dir: Path, provider_url: str | None, fmt: str = "openai", **extra: Any
) -> Settings:
    reflector: dict[str, Any] = {}
    if provider_url is not None:
        reflector = {
            "reflector_url": provider_url,
            "reflector_format": fmt,
            "reflector_model": "reflector-model",
            "reflector_key": PROVIDER_KEY,
            "reflector_timeout_seconds": 2,
        }
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "embeddings": "none",
        "ui": "off",
        "proxy": "off",
        "metrics": "off",
        "oauth": "off",
        **reflector,
        **extra,
    }
    return Settings(**values)


@dataclass
class Reflecting:
    url: str
    key: str
    provider: Provider
    service: VaultService
    clock: Clock  # the server's: a test moves it past a backoff or a lease

    def http(self, key: str | None = None) -> httpx2.Client:
        headers = {"Authorization": f"Bearer {key or self.key}"}
        return httpx2.Client(base_url=self.url, headers=headers, timeout=60)

    def ingest(self, count: int, *, first: int = 0, chars: int = 200) -> list[str]:
        ids: list[str] = []
        with self.http() as http:
            for start in range(first, first + count, 1000):
                messages = [
                    {
                        "role": "user",
                        "content": f"moment {i:05d} " + "x" * (chars - 13),
                        "date": (START + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    }
                    for i in range(start, min(first + count, start + 1000))
                ]
                response = http.post("/v1/memory/ingest", json={"messages": messages})
                assert response.status_code == 202, response.text
                ids += response.json()["ids"]
        return ids

    def get(self, path: str) -> Any:
        with self.http() as http:
            response = http.get(path)
            assert response.status_code == 200, response.text
            return response.json()

    def post(self, path: str, body: Any, key: str | None = None) -> httpx2.Response:
        with self.http(key) as http:
            return http.post(path, json=body)

    def another_vault(self) -> Reflecting:
        """The same server, acting with a new vault's key."""
        key, _ = self.service.create_vault()
        return Reflecting(self.url, key, self.provider, self.service, self.clock)

    def stats(self) -> dict[str, Any]:
        body: dict[str, Any] = self.get("/v1/memory/stats")
        return body

    def reflector(self) -> dict[str, Any]:
        body: dict[str, Any] = self.get("/v1/memory/consolidate/server")
        return body

    def reflections(self) -> int:
        return int(self.stats()["tiers"]["2"]["count"])

    def settled(self, outcome: str | None = None, timeout: float = 30.0) -> dict[str, Any]:
        """The reflector's state once a run ended (with ``outcome``, when given)."""
        found: dict[str, Any] = {}

        def done() -> bool:
            found.update(self.reflector())
            ended = found["last_run"] is not None and not found["running"]
            return ended and (outcome is None or found["last_outcome"] == outcome)

        wait_until(done, timeout)
        return found


def wait_until(condition: Callable[[], object], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@contextmanager
def reflecting(
    settings: Settings, provider: Provider, key: str | None = None
) -> Iterator[Reflecting]:
    """A server on loopback; its vault's key is ``key``, else a new vault's."""
    clock = Clock()
    server = create_server(settings, clock=clock)
    assert server.service is not None
    if key is None:
        key, _ = server.service.create_vault()
    with live_server(server.app, lifespan="on") as url:
        yield Reflecting(url, key, provider, server.service, clock)
