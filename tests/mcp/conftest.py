from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support import live_server
from tests.support.mcp import McpServer, serve_process


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[McpServer]:
    server = create_server(Settings(data_dir=tmp_path, embeddings="none"))
    assert server.service is not None
    service: VaultService = server.service
    key, _ = service.create_vault()
    with live_server(server.app, lifespan="on") as url:
        yield McpServer(url + "/mcp", key, service)


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[McpServer]:
    """The MCP server pointed at a separately started vault process."""
    vault_dir = tmp_path / "vault"
    with serve_process(vault_dir, MEMORYROUTER_EMBEDDINGS="none") as (vault_url, key):
        assert key is not None
        settings = Settings(data_dir=tmp_path / "mcp", api_url=vault_url, embeddings="none")
        server = create_server(settings)
        assert server.service is None
        store = SQLiteStore(vault_dir / "vault.sqlite3")
        service = VaultService(store, clock=lambda: time.time_ns() // 1_000_000, lease_seconds=900)
        with live_server(server.app, lifespan="on") as url:
            yield McpServer(url + "/mcp", key, service)
        store.close()


@pytest.fixture(params=["embedded", "proxy"])
def mcp_server(request: pytest.FixtureRequest) -> McpServer:
    server: McpServer = request.getfixturevalue(request.param)
    return server
