"""A memory key sent to /mcp, or the key an OAuth grant is bound to, is looked up once per
request: the token check's admission is what the request's tool calls act with (in
process), and a new request checks it afresh."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import TokenVerifier

from mcp_memoryrouter import schemas
from mcp_memoryrouter.auth.resource.memory_keys import MemoryKeyVerifier
from mcp_memoryrouter.auth.scopes import load_policy
from mcp_memoryrouter.auth.server.grants import GrantTokenVerifier
from mcp_memoryrouter.auth.server.signing import GRANT_CLAIM, Signer, new_key
from mcp_memoryrouter.auth.state.sealing import Sealer
from mcp_memoryrouter.auth.state.store import AuthStore, Grant
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


async def one_request(client: VaultClient, key: str, verifier: TokenVerifier | None = None) -> None:
    """What /mcp does for one tools/call of search_memories: the token check, then the
    tool's binding and its call to the vault."""
    token = await (verifier or MemoryKeyVerifier(client)).verify_token(key)
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


ISSUER = "http://127.0.0.1:8787"
RESOURCE = ISSUER + "/mcp"


async def test_the_key_of_an_oauth_grant_is_looked_up_once_per_request(
    counted: tuple[CountingService, VaultClient, str], tmp_path: Path
) -> None:
    service, client, key = counted
    ref = service.authenticate(key).vault_ref
    store = AuthStore.sqlite(tmp_path / "auth.sqlite3")
    sealer, signer = Sealer(base64.urlsafe_b64encode(b"k" * 32)), Signer(new_key())
    grant = Grant("g1", "an-app", ref, sealer.seal(key), ["memories:read"], RESOURCE, False)
    store.save_grant(grant, now=1_000.0)
    verifier = GrantTokenVerifier(
        signer, store, sealer, client, issuer=ISSUER, resource=RESOURCE, clock=lambda: 1_000.0
    )
    claims = {"iss": ISSUER, "sub": ref, "aud": RESOURCE, "client_id": "an-app"}
    token = signer.sign({**claims, "scope": "memories:read", "exp": 1_300, GRANT_CLAIM: "g1"})
    before = service.lookups
    await one_request(client, token, verifier)
    assert service.lookups == before + 1
    await one_request(client, token, verifier)
    assert service.lookups == before + 2
