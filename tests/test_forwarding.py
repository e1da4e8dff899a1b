"""A server without keys answers only clients on this machine that reach it directly: a
request a proxy relayed (a forwarding header, HTTP/1.0 as nginx's bare ``proxy_pass``
speaks it, a client that is not loopback) is 403 ``proxied_request`` on every surface."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx2
import pytest
from starlette.types import Scope

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.edge.forwarding import FORWARDING_HEADERS, relayed
from mcp_memoryrouter.errors import ConfigError
from tests.support import live_server

MCP = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "edge test", "version": "1"},
    },
}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
# (method, path, body, headers): one request on each surface of a keyless server
SURFACES: list[tuple[str, str, Any, dict[str, str]]] = [
    ("POST", "/mcp", INITIALIZE, MCP),
    ("GET", "/v1/memory/stats", None, {}),
    ("POST", "/v1/chat/completions", CHAT, {"Authorization": "Bearer sk-1"}),
    ("GET", "/ui/sign-in", None, {}),
    ("GET", "/healthz", None, {}),
]
PROXY_HEADERS = [
    {"X-Forwarded-For": "203.0.113.9"},
    {"X-Forwarded-Proto": "https"},
    {"Forwarded": "for=203.0.113.9;proto=https"},
    {"X-Real-IP": "203.0.113.9"},
    {"Via": "1.1 caddy"},
    {"CF-Connecting-IP": "203.0.113.9"},
]


def http10(base: str, method: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    """The request nginx's bare ``proxy_pass http://127.0.0.1:PORT`` sends upstream:
    HTTP/1.0, this server's own address in Host, no forwarding header; status and body."""
    authority = base.removeprefix("http://")
    host, port = authority.rsplit(":", 1)
    payload = b"" if body is None else json.dumps(body).encode()
    head = (
        f"{method} {path} HTTP/1.0\r\nHost: {authority}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode() + payload)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    _, _, content = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), json.loads(content) if content.startswith(b"{") else {}


def test_a_keyless_server_refuses_whatever_a_proxy_relayed_on_every_surface(
    tmp_path: Path,
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        auth="none",
        embeddings="none",
        upstream_openai_url="http://127.0.0.1:9",  # never reached: refused before
    )
    server = create_server(settings)
    with live_server(server.app, lifespan="on") as url:
        for method, path, body, headers in SURFACES:
            for proxy in PROXY_HEADERS:
                answer = httpx2.request(
                    method, url + path, json=body, headers={**headers, **proxy}, timeout=30
                )
                assert answer.status_code == 403, (path, proxy, answer.text)
                error = answer.json()["error"]
                assert error["code"] == "proxied_request"
                assert error["details"]["setting"] == "MEMORYROUTER_AUTH"
            status, refused = http10(url, method, path, body)
            assert status == 403, path
            assert refused["error"]["code"] == "proxied_request"
        # the same requests straight from this machine are the server's to answer
        direct = httpx2.post(url + "/mcp", json=INITIALIZE, headers=MCP, timeout=30)
        assert direct.status_code == 200, direct.text
        assert httpx2.get(url + "/ui/sign-in", timeout=30).status_code == 200
        assert httpx2.get(url + "/healthz", timeout=30).status_code == 200


def test_a_server_with_keys_answers_a_relayed_request_as_any_other(tmp_path: Path) -> None:
    server = create_server(Settings(data_dir=tmp_path, embeddings="none"))
    with live_server(server.app, lifespan="on") as url:
        health = httpx2.get(url + "/healthz", headers={"X-Forwarded-For": "203.0.113.9"})
        status, _ = http10(url, "GET", "/healthz", None)
    assert health.status_code == 200 and status == 200


def test_a_keyless_server_cannot_be_told_to_trust_a_proxy(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, auth="none", trusted_proxies=["127.0.0.1"])
    with pytest.raises(ConfigError, match="MEMORYROUTER_AUTH=key"):
        create_server(settings)


def scope(
    client: str | None = "127.0.0.1", version: str = "1.1", *headers: tuple[bytes, bytes]
) -> Scope:
    return {
        "type": "http",
        "http_version": version,
        "client": None if client is None else (client, 40_000),
        "headers": [(b"host", b"127.0.0.1:8787"), *headers],
    }


@pytest.mark.parametrize("name", sorted(FORWARDING_HEADERS))
def test_every_forwarding_header_shows_a_relay(name: bytes) -> None:
    assert relayed(scope("127.0.0.1", "1.1", (name, b"203.0.113.9")))


@pytest.mark.parametrize(
    ("client", "version", "direct"),
    [
        ("127.0.0.1", "1.1", True),
        ("127.0.0.1", "2", True),
        ("::1", "1.1", True),
        ("::ffff:127.0.0.1", "1.1", True),
        ("127.0.0.1", "1.0", False),  # nginx's proxy_pass, unless told otherwise
        ("10.0.0.5", "1.1", False),
        ("203.0.113.9", "1.1", False),
        ("testclient", "1.1", False),  # not an address at all
        (None, "1.1", False),  # a Unix socket: anyone may be behind it
    ],
)
def test_a_direct_request_is_loopback_http_1_1_or_later(
    client: str | None, version: str, direct: bool
) -> None:
    assert (relayed(scope(client, version)) is None) == direct
