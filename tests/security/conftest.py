from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.app import create_vault_app
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support import FakeClock


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


@pytest.fixture
def limited(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LimitedVault]:
    """``@pytest.mark.parametrize("limited", [(per_minute, burst)], indirect=True)``."""
    per_minute, burst = getattr(request, "param", (60, 3))
    vault = LimitedVault(tmp_path, per_minute, burst)
    yield vault
    vault.close()
