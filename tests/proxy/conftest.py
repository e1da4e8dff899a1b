"""A real server with the chat proxy on loopback, in front of a provider double."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.service import VaultService
from tests.proxy.upstream import Upstream
from tests.support import live_server


@dataclass
class Proxied:
    url: str  # the memory server's origin
    key: str
    service: VaultService
    upstream: Upstream
    upstream_url: str

    def vault(self, method: str, path: str, key: str | None = None, **kwargs: Any) -> Any:
        """A REST call to the vault behind the proxy, as the key's owner makes it."""
        headers = {"Authorization": f"Bearer {key or self.key}"}
        response = httpx2.request(method, self.url + path, headers=headers, timeout=30, **kwargs)
        assert response.is_success, response.text
        return response.json()

    def remember(self, *texts: str, session: str | None = None) -> None:
        messages = [{"role": "user", "content": t} for t in texts]
        body: dict[str, Any] = {"messages": messages}
        if session:
            body["session_id"] = session
        self.vault("POST", "/v1/memory/ingest", json=body)

    def stored_after(self, count: int, seconds: float = 10.0) -> list[dict[str, Any]]:
        """The raw memories once there are ``count`` of them (a proxied turn is stored after
        its response has gone, so a moment after the client has it)."""
        deadline = time.monotonic() + seconds
        while len(rows := self.stored()) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(rows) == count, [r["content"] for r in rows]
        return rows

    def settled(self, count: int) -> list[dict[str, Any]]:
        """The raw memories, checked to stay ``count`` for a while (nothing more arrives)."""
        for _ in range(10):
            rows = self.stored()
            assert len(rows) == count, [r["content"] for r in rows]
            time.sleep(0.05)
        return rows

    def stored(self, key: str | None = None) -> list[dict[str, Any]]:
        """Every raw memory of the vault, oldest first."""
        body = {"from": "2000-01-01", "order": "oldest_first"}
        page = self.vault("POST", "/v1/memory/date-search", key, json=body)
        return [m for m in page["memories"] if m["tier"] == 1]


def settings_for(data_dir: Path, upstream_url: str, **extra: Any) -> Settings:
    return Settings(
        data_dir=data_dir,
        embeddings="none",
        upstream_openai_url=upstream_url + "/v1",
        upstream_anthropic_url=upstream_url,
        upstream_google_url=upstream_url,
        **extra,
    )


@pytest.fixture
def upstream() -> Iterator[tuple[Upstream, str]]:
    double = Upstream()
    with live_server(double) as url:
        yield double, url


@pytest.fixture
def proxied(tmp_path: Path, upstream: tuple[Upstream, str]) -> Iterator[Proxied]:
    double, upstream_url = upstream
    server = create_server(settings_for(tmp_path, upstream_url))
    assert server.service is not None
    key, _ = server.service.create_vault()
    with live_server(server.app, lifespan="on") as url:
        yield Proxied(url, key, server.service, double, upstream_url)
