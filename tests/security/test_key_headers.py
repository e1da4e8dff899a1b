"""A key header carries one key, once: a second copy is refused, not used to dodge the
rate limit (authentication and the limiter read the key by one rule)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.config import Settings
from tests.support import live_server
from tests.support.api import assert_envelope
from tests.support.mcp import LEGACY, McpServer, rpc
from tests.support.vaults import LimitedVault

SEARCH = {"query": "postgres"}
DECOY = "mk_" + "d" * 43


def search(vault: LimitedVault, headers: list[tuple[str, str]]) -> httpx2.Response:
    return vault.http.post("/v1/memory/search", json=SEARCH, headers=headers)


@pytest.mark.parametrize(
    ("name", "value"),
    [("X-Memory-Key", "{key}"), ("Authorization", "Bearer {key}"), ("x-api-key", "{key}")],
)
def test_a_key_header_sent_twice_is_refused_naming_the_header(
    limited: LimitedVault, name: str, value: str
) -> None:
    headers = [(name, value.format(key=limited.key)), (name, value.format(key=DECOY))]
    response = search(limited, headers)
    assert_envelope(response, 400, "invalid_request")
    message = response.json()["error"]["message"]
    assert name in message and "send one key, once" in message


def test_a_comma_joined_key_header_is_refused(limited: LimitedVault) -> None:
    response = search(limited, [("X-Memory-Key", f"{limited.key}, {DECOY}")])
    assert_envelope(response, 400, "invalid_request")


def test_a_throttled_key_gets_nothing_through_with_a_second_copy(limited: LimitedVault) -> None:
    single = [("X-Memory-Key", limited.key)]
    assert [search(limited, single).status_code for _ in range(3)] == [200, 200, 200]
    assert search(limited, single).status_code == 429
    for n in range(5):
        doubled = [*single, ("X-Memory-Key", f"mk_{n:043d}")]
        assert search(limited, doubled).status_code in (400, 429)
        assert limited.memories() == 0


@pytest.mark.parametrize("limited", [(0, None)], indirect=True)
def test_without_a_rate_limit_a_doubled_key_header_is_still_refused(
    limited: LimitedVault,
) -> None:
    headers = [("Authorization", f"Bearer {limited.key}"), ("Authorization", f"Bearer {DECOY}")]
    assert_envelope(search(limited, headers), 400, "invalid_request")
    key_lookup = limited.http.get(
        "/v1/keys/current", headers=[("x-api-key", limited.key), ("x-api-key", DECOY)]
    )
    assert_envelope(key_lookup, 400, "invalid_request")


def test_one_key_in_each_of_two_headers_is_not_a_duplicate(limited: LimitedVault) -> None:
    headers = [("X-Memory-Key", limited.key), ("x-api-key", DECOY)]
    assert search(limited, headers).status_code == 200  # X-Memory-Key is read first


@pytest.fixture
def mcp(tmp_path: Path) -> Iterator[McpServer]:
    # memory keys only: the duplicate check sits in front of every bearer verifier
    server = create_server(Settings(data_dir=tmp_path, embeddings="none", oauth="off"))
    assert server.service is not None
    service = server.service
    key, _ = service.create_vault()
    with live_server(server.app, lifespan="on") as url:
        yield McpServer(url + "/mcp", key, service)


def test_mcp_refuses_two_authorization_headers_with_400(mcp: McpServer) -> None:
    headers = [
        *LEGACY.items(),
        ("Authorization", f"Bearer {mcp.key}"),
        ("Authorization", f"Bearer {DECOY}"),
    ]
    response = httpx2.post(mcp.url, json=rpc("tools/list"), headers=headers, timeout=30)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert 'error="invalid_request"' in response.headers["www-authenticate"]
    single = [*LEGACY.items(), ("Authorization", f"Bearer {mcp.key}")]
    assert httpx2.post(mcp.url, json=rpc("tools/list"), headers=single).status_code == 200
