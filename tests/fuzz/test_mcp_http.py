"""Malformed JSON-RPC, oversized bodies and text that is not Unicode, sent to /mcp over a
real uvicorn: always a JSON-RPC error or an HTTP refusal, never a 5xx, nothing stored."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.config import Settings
from tests.support import live_server

MAX_MCP_BODY = 4 * 1024 * 1024


@dataclass
class Endpoint:
    url: str
    key: str
    database: Path

    def post(self, body: bytes, **headers: str) -> httpx2.Response:
        sent = {
            "Authorization": f"Bearer {self.key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-06-18",
            **headers,
        }
        return httpx2.post(self.url, content=body, headers=sent, timeout=30)

    def memories(self) -> int:
        with closing(sqlite3.connect(self.database)) as conn:
            return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    data_dir = tmp_path_factory.mktemp("mcp-http")
    server = create_server(Settings(data_dir=data_dir, embeddings="none"))
    assert server.service is not None
    key, _ = server.service.create_vault()
    with live_server(server.app, lifespan="on") as url:
        yield Endpoint(url + "/mcp", key, data_dir / "vault.sqlite3")


def rpc(method: str, params: str = "{}") -> bytes:
    return f'{{"jsonrpc":"2.0","id":7,"method":"{method}","params":{params}}}'.encode()


MALFORMED = [
    b"",
    b"not json",
    b"{",
    b"\xff\xfe\x00",
    b"null",
    b"[]",
    b"42",
    b'"tools/list"',
    b'{"jsonrpc":"2.0"}',
    b'{"jsonrpc":"1.0","id":1,"method":"tools/list"}',
    b'{"jsonrpc":"2.0","id":1,"method":5}',
    b'{"jsonrpc":"2.0","id":[1],"method":"tools/list"}',
    b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}',
    b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]',
    b"[" * 100_000 + b"]" * 100_000,  # deeper than Python's json can recurse
    b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    rpc("nope"),
    rpc("tools/call", "5"),
    rpc("tools/call", '{"name":5}'),
    rpc("tools/call", '{"name":"store_memory","arguments":"x"}'),
    rpc("tools/call", '{"name":"no_such_tool","arguments":{}}'),
    rpc("resources/read", '{"uri":5}'),
]


@pytest.mark.parametrize("body", MALFORMED, ids=lambda b: repr(b[:40]))
def test_malformed_json_rpc_is_answered_without_a_server_error(mcp: Endpoint, body: bytes) -> None:
    response = mcp.post(body)
    assert response.status_code < 500, response.text
    if response.content:
        answer = response.json()
        assert answer["jsonrpc"] == "2.0"
        # a JSON-RPC error, or a tool's own error result
        assert set(answer.get("error", {})) >= {"code", "message"} or answer["result"]["isError"]


def test_the_endpoint_still_serves_after_the_malformed_bodies(mcp: Endpoint) -> None:
    response = mcp.post(rpc("tools/list"))
    assert response.status_code == 200
    assert any(t["name"] == "store_memory" for t in response.json()["result"]["tools"])


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_over_four_mib_is_413(mcp: Endpoint, chunked: bool) -> None:
    filler = "x" * (MAX_MCP_BODY + 1)
    body = rpc("tools/call", f'{{"name":"store_memory","arguments":{{"content":"{filler}"}}}}')
    headers = {
        "Authorization": f"Bearer {mcp.key}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }

    def pieces() -> Iterator[bytes]:
        for start in range(0, len(body), 65_536):
            yield body[start : start + 65_536]

    content: bytes | Iterator[bytes] = pieces() if chunked else body
    response = httpx2.post(mcp.url, content=content, headers=headers, timeout=30)
    assert response.status_code == 413
    assert mcp.memories() == 0


@pytest.mark.parametrize(
    "content",
    [b"caf\xe9", b"\xed\xa0\x80", b"\\ud800 lone", b"lone \\udfff"],
    ids=["latin-1", "encoded-surrogate", "high-surrogate", "low-surrogate"],
)
def test_memory_text_that_is_not_unicode_is_refused_and_not_stored(
    mcp: Endpoint, content: bytes
) -> None:
    call = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":'
    arguments = b'{"name":"store_memory","arguments":{"content":"' + content + b'"}}}'
    response = mcp.post(call + arguments)
    assert response.status_code < 500
    answer = response.json()
    assert "error" in answer or answer["result"]["isError"] is True
    assert mcp.memories() == 0


def test_a_body_over_four_mib_is_413_without_authentication_too(tmp_path: Path) -> None:
    server = create_server(Settings(data_dir=tmp_path, embeddings="none", auth="none"))
    filler = b"x" * (MAX_MCP_BODY + 1)
    body = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"store_memory",'
    body += b'"arguments":{"content":"' + filler + b'"}}}'
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    with live_server(server.app, lifespan="on") as url:
        response = httpx2.post(url + "/mcp", content=body, headers=headers, timeout=30)
    assert response.status_code == 413
