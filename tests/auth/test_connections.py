"""The apps connected to a vault, as the authorization server's store keeps them (the
explorer's Tidy page reads and disconnects them): each client whose grants on that vault can
still get tokens, with what they allow and when they were last active; disconnecting one
revokes its grants on that vault only. On SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_memoryrouter.auth.state.database import PostgresPool
from mcp_memoryrouter.auth.state.store import AUTH_DB_FILE, AuthStore, Grant
from tests import pg

T0 = 1_800_000_000.0
DAY = 86_400.0


@pytest.fixture(params=pg.BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AuthStore]:
    if request.param == "sqlite":
        made = AuthStore.sqlite(tmp_path / AUTH_DB_FILE)
        yield made
        made.close()
        return
    databases: pg.Databases = request.getfixturevalue("postgres_databases")
    url = databases.create()
    pool = PostgresPool(url)
    try:
        yield AuthStore.postgres(pool)
    finally:
        pool.close()
        databases.release(url)


def grant(store: AuthStore, grant_id: str, client: str, vault: str, scopes: str, at: float) -> None:
    store.save_grant(Grant(grant_id, client, vault, "sealed", scopes.split(), "r", False), at)
    store.save_refresh(f"refresh-{grant_id}", grant_id, scopes.split(), at + 30 * DAY)


def test_a_vaults_apps_are_listed_with_their_scopes_together_and_their_last_activity(
    store: AuthStore,
) -> None:
    store.save_client("c1", {"client_name": "Claude", "redirect_uris": ["https://c/cb"]}, T0)
    grant(store, "g1", "c1", "vr_a", "memories:read memories:write", T0)
    grant(store, "g2", "c1", "vr_a", "memories:read memories:delete", T0 + DAY)  # a step-up
    grant(store, "g3", "https://chatgpt.com/oauth/x/client.json", "vr_a", "memories:read", T0)
    grant(store, "g4", "c1", "vr_b", "memories:read", T0)  # another vault's
    store.note_use("g1", T0 + 2 * DAY)
    (claude, chatgpt) = store.connections("vr_a", T0 + 3 * DAY)
    assert (claude.client_id, claude.client_name) == ("c1", "Claude")
    assert claude.redirect_uris == ("https://c/cb",)
    assert claude.scopes == ("memories:read", "memories:write", "memories:delete")
    assert (claude.connected_at, claude.last_used_at) == (T0, T0 + 2 * DAY)
    assert chatgpt.client_name is None and chatgpt.last_used_at == T0
    assert [c.client_id for c in store.connections("vr_b", T0)] == ["c1"]


def test_grants_that_can_no_longer_get_tokens_are_not_connections(store: AuthStore) -> None:
    grant(store, "old", "c1", "vr_a", "memories:read", T0)
    grant(store, "spent", "c2", "vr_a", "memories:read", T0)
    assert store.use_refresh("refresh-spent")
    grant(store, "gone", "c3", "vr_a", "memories:read", T0)
    store.revoke_grant("gone")
    store.save_grant(Grant("new", "c4", "vr_a", "sealed", ["memories:read"], "r", False), T0)
    store.save_code("code", "new", "https://c/cb", True, "x" * 43, T0 + 60)
    assert [c.client_id for c in store.connections("vr_a", T0 + 10)] == ["c1", "c4"]
    assert [c.client_id for c in store.connections("vr_a", T0 + 31 * DAY)] == []


def test_disconnecting_revokes_the_clients_grants_on_that_vault_only(store: AuthStore) -> None:
    grant(store, "g1", "c1", "vr_a", "memories:read", T0)
    grant(store, "g2", "c1", "vr_a", "memories:write", T0)
    grant(store, "g3", "c1", "vr_b", "memories:read", T0)
    assert store.disconnect("vr_b", "nobody") == 0
    assert store.disconnect("vr_a", "c1") == 2
    assert store.disconnect("vr_a", "c1") == 0
    assert [(g.id, g.revoked) for g in map(store.grant, ("g1", "g2", "g3")) if g] == [
        ("g1", True),
        ("g2", True),
        ("g3", False),
    ]
    assert store.connections("vr_a", T0) == []
