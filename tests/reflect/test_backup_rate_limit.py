"""Backups under a rate limit: export is one streamed request, and every request the
package's client sends rides out a 429 by waiting its Retry-After (an injected sleep)."""

from __future__ import annotations

import io
from pathlib import Path

import httpx2
import pytest

from mcp_memoryrouter import schemas
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.transfer.archive import read_archive
from mcp_memoryrouter.transfer.export import export_vault
from mcp_memoryrouter.transfer.importer import import_archive
from mcp_memoryrouter.vault.app import create_vault_app
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support import FakeClock

pytestmark = pytest.mark.anyio


class Limited:
    """A vault app allowing 60 requests a minute in bursts of 2, refilled by ``clock``;
    a client of it sleeps by moving that clock."""

    def __init__(self, path: Path) -> None:
        self.clock = FakeClock()
        self.store = SQLiteStore(path)
        self.service = VaultService(self.store, clock=self.clock, lease_seconds=900)
        settings = Settings(data_dir=path.parent, rate_limit_per_minute=60, rate_limit_burst=2)
        self.app = create_vault_app(settings, service=self.service, rate_clock=self.clock)
        self.key, _ = self.service.create_vault()
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(seconds)

    def client(self) -> VaultClient:
        transport = httpx2.ASGITransport(app=self.app)
        return VaultClient("http://vault", self.key, transport=transport, sleep=self.sleep)


async def test_export_and_import_of_a_large_vault_ride_out_the_rate_limit(
    tmp_path: Path,
) -> None:
    source = Limited(tmp_path / "source.sqlite3")
    client = source.client()
    for start in range(0, 900, 300):
        messages = [
            schemas.MessageIn(content=f"Moment {i}: a decision.", date=f"2026-02-{1 + i % 28:02d}")
            for i in range(start, start + 300)
        ]
        assert (await client.ingest(schemas.IngestRequest(messages=messages))).stored == 300
    for _ in range(2):  # the burst is spent before the export starts
        await client.stats()
    source.waits.clear()
    out = io.StringIO()
    written = await export_vault(client, out.write)
    assert written == 900
    assert source.waits == [1.0]  # one request, throttled once, then streamed whole
    await client.aclose()

    target = Limited(tmp_path / "target.sqlite3")
    restore = target.client()
    for _ in range(2):
        await restore.stats()
    report = await import_archive(restore, read_archive(io.StringIO(out.getvalue())))
    assert report.stored == 900
    assert target.waits == [1.0, 1.0]  # both ingest requests throttled, then retried
    assert (await restore.stats()).total_memories == 900
    await restore.aclose()
    source.store.close()
    target.store.close()
