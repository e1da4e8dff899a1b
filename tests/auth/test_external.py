"""External authorization server mode: tokens from an operator's identity provider (a JWKS
served on loopback here), bound to vaults by the operator's bindings file."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.auth.resource.external import BindingsError
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.errors import ConfigError
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support import Clock
from tests.support.loopback import borrowed
from tests.support.oauth import OAuthServer, call_mcp


@dataclass
class IdentityProvider:
    issuer: str
    keys: list[RSAKey]  # the first one signs; all are published

    def token(self, key: RSAKey | None = None, **claims: Any) -> str:
        signer = key or self.keys[0]
        now = int(time.time())
        body = {"iss": self.issuer, "sub": "user-1", "iat": now, "exp": now + 300, **claims}
        return jwt.encode({"alg": "RS256", "kid": signer.kid}, body, signer)


def new_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig"}, private=True)


@pytest.fixture(scope="module")
def shared_idp() -> Iterator[IdentityProvider]:
    with borrowed() as slot:
        provider = IdentityProvider(slot.url, [new_key("k1")])

        async def jwks(_: Request) -> JSONResponse:
            return JSONResponse(KeySet(list(provider.keys)).as_dict(private=False))

        with slot.serving(Starlette(routes=[Route("/jwks.json", jwks)]), lifespan="on"):
            yield provider


@pytest.fixture
def idp(shared_idp: IdentityProvider) -> Iterator[IdentityProvider]:
    """The module's identity provider (a 2048-bit key costs a tenth of a second), its keys
    put back after the test."""
    keys = list(shared_idp.keys)
    yield shared_idp
    shared_idp.keys[:] = keys


def make_vault(data_dir: Path) -> str:
    store = SQLiteStore(data_dir / "vault.sqlite3")
    key, _ = VaultService(store, clock=lambda: 0, lease_seconds=900).create_vault()
    store.close()
    return key


def write_bindings(path: Path, bindings: dict[str, str], mode: int = 0o600) -> Path:
    path.write_text(json.dumps(bindings))
    path.chmod(mode)
    return path


def external_settings(data_dir: Path, idp: IdentityProvider, base: str) -> Settings:
    return Settings(
        data_dir=data_dir,
        embeddings="none",
        public_url=base,
        oauth="external",
        oauth_issuer=idp.issuer,
        oauth_jwks_url=idp.issuer + "/jwks.json",
    )


@contextmanager
def external_at(data_dir: Path, idp: IdentityProvider) -> Iterator[OAuthServer]:
    """A server in external mode; "alice" is bound to its one vault."""
    key = make_vault(data_dir)
    write_bindings(data_dir / "oauth-bindings.json", {"alice": key})
    with borrowed() as slot:
        clock = Clock()
        server = create_server(external_settings(data_dir, idp, slot.url), clock=clock)
        assert server.service is not None
        with slot.serving(server.app, lifespan="on"):
            yield OAuthServer(slot.url, server, server.service, key, clock)


@pytest.fixture(scope="module")
def shared_external(
    tmp_path_factory: pytest.TempPathFactory, shared_idp: IdentityProvider
) -> Iterator[OAuthServer]:
    with external_at(tmp_path_factory.mktemp("external"), shared_idp) as server:
        yield server


@pytest.fixture
def external(shared_external: OAuthServer, idp: IdentityProvider) -> Iterator[OAuthServer]:
    """The module's server (only one test writes to alice's vault), its clock put back."""
    yield shared_external
    shared_external.clock.offset = 0.0


@pytest.fixture
def own_external(tmp_path: Path, idp: IdentityProvider) -> Iterator[OAuthServer]:
    """A server of the test's own: what it fetched of the provider's keys, and when, is
    what the test is about."""
    with external_at(tmp_path, idp) as server:
        yield server


def test_a_bound_token_from_the_issuer_reaches_its_vault_with_its_scopes(
    external: OAuthServer, idp: IdentityProvider
) -> None:
    token = idp.token(
        aud=external.mcp_url, scope="memories:read memories:write", memoryrouter_vault="alice"
    )
    stored = call_mcp(external, token, "store_memory", content="from the identity provider")
    assert stored.status_code == 200 and not stored.json()["result"]["isError"]
    status = call_mcp(external, token, "memory_status").json()["result"]["structuredContent"]
    assert status["granted_scopes"] == ["memories:read", "memories:write"]
    assert status["total_memories"] == 1
    refused = call_mcp(external, token, "delete_memories", ids=["x"])
    assert refused.status_code == 403


@pytest.mark.parametrize(
    "claims",
    [
        {"iss": "http://127.0.0.1:1"},
        {"aud": "https://elsewhere.example/mcp"},
        {"exp": 1},
        {"memoryrouter_vault": "mallory"},
        {"memoryrouter_vault": None},
    ],
)
def test_tokens_from_elsewhere_for_elsewhere_expired_or_unbound_are_401(
    external: OAuthServer, idp: IdentityProvider, claims: dict[str, Any]
) -> None:
    good: dict[str, Any] = {
        "aud": external.mcp_url,
        "scope": "memories:read",
        "memoryrouter_vault": "alice",
    }
    token = idp.token(**{k: v for k, v in {**good, **claims}.items() if v is not None})
    assert call_mcp(external, token, "memory_status").status_code == 401


def test_a_token_signed_by_an_unpublished_key_is_401(
    external: OAuthServer, idp: IdentityProvider
) -> None:
    stranger = new_key("k1")
    token = idp.token(stranger, aud=external.mcp_url, memoryrouter_vault="alice")
    assert call_mcp(external, token, "memory_status").status_code == 401


def test_a_rotated_signing_key_is_fetched_when_first_seen(
    own_external: OAuthServer, idp: IdentityProvider
) -> None:
    external = own_external
    claims: dict[str, Any] = {
        "aud": external.mcp_url,
        "scope": "memories:read",
        "memoryrouter_vault": "alice",
    }
    assert call_mcp(external, idp.token(**claims), "memory_status").status_code == 200
    idp.keys.insert(0, new_key("k2"))
    # an unknown kid refetches the JWKS, though not more often than every 30 s
    assert call_mcp(external, idp.token(**claims), "memory_status").status_code == 401
    external.clock.advance(31)
    assert call_mcp(external, idp.token(**claims), "memory_status").status_code == 200


def test_discovery_names_the_external_issuer_and_no_embedded_endpoints(
    external: OAuthServer, idp: IdentityProvider
) -> None:
    document = httpx2.get(external.base + "/.well-known/oauth-protected-resource/mcp").json()
    assert document["authorization_servers"] == [idp.issuer]
    assert httpx2.get(external.base + "/.well-known/oauth-authorization-server").status_code == 404
    challenge = httpx2.post(external.mcp_url, json={}).headers["www-authenticate"]
    assert "resource_metadata=" in challenge
    assert call_mcp(external, external.key, "memory_status").status_code == 200  # keys still work


def test_external_mode_refuses_to_start_without_issuer_or_with_an_open_bindings_file(
    tmp_path: Path, idp: IdentityProvider
) -> None:
    with pytest.raises(ConfigError):
        create_server(Settings(data_dir=tmp_path, embeddings="none", oauth="external"))
    write_bindings(tmp_path / "oauth-bindings.json", {"alice": "mk_x"}, mode=0o644)
    with pytest.raises(BindingsError, match="chmod 600"):
        create_server(external_settings(tmp_path, idp, "http://127.0.0.1:9"))
