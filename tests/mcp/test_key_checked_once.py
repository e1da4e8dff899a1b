"""A memory key sent to /mcp is looked up once per request: the token check's admission is
what the request's tool calls act with (in process), and a new request checks it afresh."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

from mcp_memoryrouter import schemas
from mcp_memoryrouter.auth.resource.memory_keys import MemoryKeyVerifier
from mcp_memoryrouter.auth.scopes import load_policy
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.mcp_server.binding import Binder
from mcp_memoryrouter.mcp_server.budget import ResultBudget
from mcp_memoryrouter.vault.app import create_vault_app, in_process
from mcp_memoryrouter.vault.rules.access import Access
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support import FakeClock

pytestmark = pytest.mark.anyio


class CountingService(VaultService):
    """The vault's service, counting the keys it looks up."""

    lookups = 0

    def authenticate(self, presented: str | None) -> Access:
        self.lookups += 1
        return super().authenticate(presented)


@pytest.fixture
def counted(tmp_path: Path) -> Iterator[tuple[CountingService, VaultClient, str]]:
    store = SQLiteStore(tmp_path / "vault.db")
    service = CountingService(store, clock=FakeClock(), lease_seconds=900)
    key, _ = service.create_vault()
    app = create_vault_app(Settings(data_dir=tmp_path), service=service)
    yield service, VaultClient("http://vault.internal", carrier=in_process(app)), key
    store.close()


async def one_request(client: VaultClient, key: str) -> None:
    """What /mcp does for one tools/call of search_memories: the token check, then the
    tool's binding and its call to the vault."""
    token = await MemoryKeyVerifier(client).verify_token(key)
    assert token is not None
    binder = Binder(client, load_policy(), ResultBudget(4000))
    needed = binder.policy.for_tool("search_memories")
    assert needed is not None
    user = auth_context_var.set(AuthenticatedUser(token))
    try:
        binding = await binder.bind(needed)
        await binding.client.search(schemas.SearchRequest(query="garden"))
    finally:
        auth_context_var.reset(user)


async def test_a_memory_key_is_looked_up_once_per_request(
    counted: tuple[CountingService, VaultClient, str],
) -> None:
    service, client, key = counted
    await one_request(client, key)
    assert service.lookups == 1
    await one_request(client, key)
    assert service.lookups == 2  # each request checks the key afresh
