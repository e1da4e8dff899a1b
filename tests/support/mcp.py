"""The MCP endpoint as the tests reach it: the SDK client over HTTP, raw JSON-RPC posts, and
the server as its own process (``serve``, ``stdio``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx2
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support import free_port, live_server

Mode = Literal["auto", "legacy"]


ResponseHook = Callable[[httpx2.Response], Awaitable[None]]


@dataclass
class McpServer:
    url: str  # the /mcp endpoint
    key: str
    service: VaultService  # the vault behind it, to mint more keys

    def new_key(self, *, read_only: bool = False) -> str:
        key, _ = self.service.create_vault(read_only=read_only)
        return key

    @asynccontextmanager
    async def client(
        self, key: str | None = None, mode: Mode = "auto", hooks: Sequence[ResponseHook] = ()
    ) -> AsyncIterator[Client]:
        """The SDK's client over HTTP with ``key``; ``hooks`` see every HTTP response."""
        headers = {"Authorization": f"Bearer {key or self.key}"}
        async with (
            httpx2.AsyncClient(
                headers=headers, timeout=30, event_hooks={"response": list(hooks)}
            ) as http,
            Client(streamable_http_client(self.url, http_client=http), mode=mode) as client,
        ):
            yield client


@contextmanager
def serve_process(data_dir: Path, **env: str) -> Iterator[tuple[str, str | None]]:
    """``mcp-memoryrouter serve`` as its own process: (base URL, first key if printed)."""
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / "serve.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_memoryrouter", "serve", "--port", str(port)],
            env={**os.environ, "MEMORYROUTER_DATA_DIR": str(data_dir), **env},
            stderr=sink,
            stdout=subprocess.DEVNULL,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx2.get(url + "/healthz", timeout=1)
                break
            except httpx2.TransportError:
                assert time.monotonic() < deadline, "serve did not start within 30 s"
                assert proc.poll() is None, log.read_text()
                time.sleep(0.05)
        keys = [ln.strip() for ln in log.read_text().splitlines() if ln.strip().startswith("mk_")]
        first_run = data_dir / "first-run.key"  # where serve puts it when stderr is no terminal
        if not keys and first_run.exists():
            keys = [first_run.read_text().strip()]
        yield url, keys[0] if keys else None
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def stdio_server(data_dir: Path, **env: str) -> tuple[StdioServerParameters, str]:
    """``mcp-memoryrouter stdio`` as a local client starts it, over a new vault in
    ``data_dir``: (how to start it, the vault's key it acts with)."""
    store = SQLiteStore(data_dir / "vault.sqlite3")
    key, _ = VaultService(store, clock=lambda: 0, lease_seconds=900).create_vault()
    store.close()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_memoryrouter", "stdio"],
        env={**os.environ, "MEMORYROUTER_DATA_DIR": str(data_dir), "MEMORYROUTER_KEY": key, **env},
    )
    return params, key


LEGACY = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def rpc(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return rpc("tools/call", {"name": name, "arguments": arguments})


def post(
    server: McpServer, body: object, key: str | None = None, **headers: str
) -> httpx2.Response:
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx2.post(server.url, json=body, headers={**LEGACY, **auth, **headers}, timeout=30)


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def text_of(result: CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


@contextmanager
def embedded_at(data_dir: Path) -> Iterator[McpServer]:
    """The whole server (vault, MCP endpoint) in this process, on a real loopback socket."""
    server = create_server(Settings(data_dir=data_dir, embeddings="none"))
    assert server.service is not None
    service: VaultService = server.service
    key, _ = service.create_vault()
    with live_server(server.app, lifespan="on") as url:
        yield McpServer(url + "/mcp", key, service)


@contextmanager
def proxy_at(folder: Path) -> Iterator[McpServer]:
    """The MCP server pointed at a separately started vault process (``serve``)."""
    vault_dir = folder / "vault"
    with serve_process(vault_dir, MEMORYROUTER_EMBEDDINGS="none") as (vault_url, key):
        assert key is not None
        settings = Settings(data_dir=folder / "mcp", api_url=vault_url, embeddings="none")
        server = create_server(settings)
        assert server.service is None
        store = SQLiteStore(vault_dir / "vault.sqlite3")
        service = VaultService(store, clock=lambda: time.time_ns() // 1_000_000, lease_seconds=900)
        try:
            with live_server(server.app, lifespan="on") as url:
                yield McpServer(url + "/mcp", key, service)
        finally:
            store.close()
