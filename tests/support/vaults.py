"""A vault whose rate limit a test clock refills, what one vault holds for another to reach
for, and the MCP tools in memory over a vault."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass
from pathlib import Path

import httpx2
from mcp.client import Client
from starlette.testclient import TestClient

from mcp_memoryrouter.auth.scopes import load_policy
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.mcp_server.binding import Binder
from mcp_memoryrouter.mcp_server.budget import ResultBudget
from mcp_memoryrouter.mcp_server.server import build_server
from mcp_memoryrouter.vault.app import create_vault_app
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support import FakeClock, Vault


class LimitedVault:
    """A vault app whose rate limit refills by a clock the test moves."""

    def __init__(self, tmp_path: Path, per_minute: int, burst: int | None) -> None:
        self.clock = FakeClock()
        self.store = SQLiteStore(tmp_path / "vault.sqlite3")
        self.service = VaultService(self.store, clock=self.clock, lease_seconds=900)
        settings = Settings(
            data_dir=tmp_path, rate_limit_per_minute=per_minute, rate_limit_burst=burst
        )
        app = create_vault_app(settings, service=self.service, rate_clock=self.clock)
        self.http = TestClient(app, raise_server_exceptions=False)
        self.key, _ = self.service.create_vault()

    def memories(self) -> int:
        """Rows in the memories table, across every vault."""
        with closing(sqlite3.connect(self.store._path)) as conn:
            return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])

    def close(self) -> None:
        self.http.close()
        self.store.close()


@dataclass
class Owned:
    """What vault A holds, for vault B to reach for."""

    raw_ids: list[str]
    reflection_id: str
    committed_batch: str
    open_batch: str
    texts: list[str]


ENTRY_TEXT = "Ana settled the database question for the auth service."


ENTRY: dict[str, object] = {"text": ENTRY_TEXT, "importance": 7}


def fill(vault: Vault, key: str) -> Owned:
    texts = ["Zanzibar codeword: we chose Postgres.", "Quokka budget is 4,200 euros."]
    ids = vault.ingest(*texts, key=key)["ids"]
    batch = vault.post("/v1/memory/consolidate/checkout", {"tier": 1}, key).json()
    done = vault.post(
        "/v1/memory/consolidate/commit",
        {"batch_id": batch["batch_id"], "entries": [ENTRY]},
        key,
    ).json()
    later = vault.ingest("Xylophone lessons on Tuesdays.", key=key, date="2026-02-03")["ids"]
    open_batch = vault.post("/v1/memory/consolidate/checkout", {"tier": 1}, key).json()
    return Owned(
        ids + later,
        done["created"][0]["id"],
        batch["batch_id"],
        open_batch["batch_id"],
        [*texts, "Xylophone lessons on Tuesdays.", ENTRY_TEXT],
    )


@asynccontextmanager
async def tools_for(vault: Vault, key: str) -> AsyncIterator[Client]:
    """The MCP tools in memory, acting with ``key`` on ``vault``."""
    transport = httpx2.ASGITransport(app=vault.app)
    vault_client = VaultClient("http://vault.internal", transport=transport)
    server = build_server(
        Binder(vault_client, load_policy(), ResultBudget(Settings().mcp_result_tokens), key)
    )
    try:
        async with Client(server) as client:
            yield client
    finally:
        await vault_client.aclose()
