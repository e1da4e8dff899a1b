from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest
from anyio.from_thread import start_blocking_portal
from mcp.client import Client

from mcp_memoryrouter.auth.scopes import load_policy
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.mcp_server.binding import Binder
from mcp_memoryrouter.mcp_server.budget import ResultBudget
from mcp_memoryrouter.mcp_server.server import build_server
from tests.support import make_vault
from tests.support.tools import ToolHarness


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolHarness]:
    vault = make_vault(tmp_path_factory.mktemp("tools"))
    ids = vault.ingest("We chose Postgres for auth.", "Ana prefers tea in the morning.")["ids"]
    vault_client = VaultClient(
        "http://vault.internal", transport=httpx2.ASGITransport(app=vault.app)
    )
    server = build_server(
        Binder(vault_client, load_policy(), ResultBudget(Settings().mcp_result_tokens), vault.key)
    )
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(server)) as client,
    ):
        yield ToolHarness(vault, client, portal, ids)
        portal.call(vault_client.aclose)
    vault.http.close()
    vault.store.close()
