"""Discovery and the resource server: protected-resource metadata, authorization-server
metadata, JWKS, the challenges on /mcp, the pages' headers, memory keys alongside tokens."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from mcp_memoryrouter.config import Settings
from tests.support.oauth import (
    OAuthServer,
    authorize_url,
    call_mcp,
    grant_tokens,
    oauth_server_at,
    pkce,
    register,
)

pytestmark = pytest.mark.anyio
SCOPES = ["memories:read", "memories:write", "memories:reflect", "memories:delete"]


def test_protected_resource_metadata_is_served_at_the_root_and_the_path_inserted_url(
    oauth_server: OAuthServer,
) -> None:
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ]:
        response = httpx2.get(oauth_server.base + path, headers={"Origin": "https://a.example"})
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == "*"
        document = response.json()
        assert document["resource"] == oauth_server.mcp_url
        assert document["authorization_servers"] == [oauth_server.base]
        # what a client asks for at first connection; delete comes by step-up
        assert document["scopes_supported"] == SCOPES[:3]


def test_authorization_server_metadata_matches_the_issuer_exactly(
    oauth_server: OAuthServer,
) -> None:
    documents = [
        httpx2.get(oauth_server.base + path).json()
        for path in ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"]
    ]
    assert documents[0] == documents[1]
    meta = documents[0]
    assert meta["issuer"] == oauth_server.base  # no trailing slash
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert "none" in meta["token_endpoint_auth_methods_supported"]
    assert meta["client_id_metadata_document_supported"] is True
    assert meta["authorization_response_iss_parameter_supported"] is True
    assert meta["scopes_supported"] == SCOPES  # memories:delete can be asked for
    for endpoint in ["authorization", "token", "registration", "revocation"]:
        assert meta[f"{endpoint}_endpoint"].startswith(oauth_server.base + "/")
    jwks = httpx2.get(meta["jwks_uri"]).json()
    assert [k["kty"] for k in jwks["keys"]] == ["EC"] and "d" not in jwks["keys"][0]


def test_metadata_preflights_are_open_to_any_origin(oauth_server: OAuthServer) -> None:
    response = httpx2.options(
        oauth_server.base + "/token",
        headers={"Origin": "https://claude.ai", "Access-Control-Request-Method": "POST"},
    )
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"


def test_the_401_points_at_the_resource_metadata_and_asks_for_ordinary_use(
    oauth_server: OAuthServer,
) -> None:
    response = httpx2.post(oauth_server.mcp_url, json={})
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    metadata = oauth_server.base + "/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{metadata}"' in challenge
    assert 'scope="memories:read memories:write memories:reflect"' in challenge


async def test_the_403_step_up_challenge_points_at_the_resource_metadata(
    oauth_server: OAuthServer,
) -> None:
    _, tokens = await grant_tokens(oauth_server, scope="memories:read")
    response = call_mcp(oauth_server, tokens["access_token"], "delete_memories", ids=["x"])
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and 'scope="memories:delete"' in challenge
    assert "resource_metadata=" in challenge


def test_memory_keys_still_work_on_mcp(oauth_server: OAuthServer) -> None:
    response = call_mcp(oauth_server, oauth_server.key, "memory_status")
    assert response.status_code == 200
    granted = response.json()["result"]["structuredContent"]["granted_scopes"]
    assert granted == sorted(SCOPES)


def test_the_pages_cannot_be_framed_and_carry_no_script(oauth_server: OAuthServer) -> None:
    client_id = register(oauth_server)
    _, challenge = pkce()
    with httpx2.Client() as browser:  # the pending request's cookie goes with it
        started = browser.get(authorize_url(oauth_server, client_id, challenge))
        page = browser.get(started.headers["location"])
    assert page.status_code == 200
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    assert "<script" not in page.text and '<label for="memory_key">' in page.text
    assert page.headers["cache-control"] == "no-store"


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "https://claude.ai/api/mcp/auth_callback",
        "https://claude.com/api/mcp/auth_callback",
        "https://chatgpt.com/connector_platform_oauth_redirect",
        "https://chatgpt.com/connector/oauth/abc123",
    ],
)
def test_the_claude_and_chatgpt_callbacks_work_as_redirect_uris(
    oauth_server: OAuthServer, redirect_uri: str
) -> None:
    client_id = register(oauth_server, [redirect_uri])
    _, challenge = pkce()
    url = authorize_url(oauth_server, client_id, challenge, redirect_uri=redirect_uri)
    response = httpx2.get(url)
    assert response.status_code == 302
    assert response.headers["location"].startswith(oauth_server.base + "/oauth/sign-in")


def test_a_recreated_chatgpt_connector_keeps_working(oauth_server: OAuthServer) -> None:
    client_id = register(oauth_server, ["https://chatgpt.com/connector/oauth/first"])
    _, challenge = pkce()
    again = "https://chatgpt.com/connector/oauth/second"
    url = authorize_url(oauth_server, client_id, challenge, redirect_uri=again)
    assert httpx2.get(url).status_code == 302
    nested = "https://chatgpt.com/connector/oauth/second/../../evil"
    assert (
        httpx2.get(
            authorize_url(oauth_server, client_id, challenge, redirect_uri=nested)
        ).status_code
        == 400
    )


async def test_keys_persist_with_owner_only_permissions_and_tokens_survive_a_restart(
    tmp_path: Any,
) -> None:
    with oauth_server_at(tmp_path) as first:
        client_id, tokens = await grant_tokens(first)
        vault_key = first.key
    for name in ["oauth-signing-key.json", "oauth-sealing.key", "auth.sqlite3"]:
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600
        assert vault_key.encode() not in (tmp_path / name).read_bytes()
    with oauth_server_at(tmp_path) as second:
        # a new port means a new issuer: tokens from the old one are refused ...
        assert call_mcp(second, tokens["access_token"], "memory_status").status_code == 401
        # ... while the persisted signing key verifies what this issuer signs
        _, fresh = await grant_tokens(second, key=vault_key)
        assert call_mcp(second, fresh["access_token"], "memory_status").status_code == 200
    assert client_id


@pytest.mark.parametrize(
    ("options", "base"),
    [
        ({"public_url": "https://memory.example.com/"}, "https://memory.example.com"),
        ({"host": "0.0.0.0", "port": 8787}, "http://127.0.0.1:8787"),
        ({"host": "localhost", "port": 9000}, "http://localhost:9000"),
    ],
)
def test_the_issuer_is_the_public_url_without_a_trailing_slash(
    options: dict[str, Any], base: str
) -> None:
    assert Settings(**options).base_url == base
