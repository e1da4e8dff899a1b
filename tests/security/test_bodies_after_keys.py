"""A request body is read only for a caller the vault knows, and only for so long: on REST
and on the chat proxy, a request without a key (or with an unknown one) is refused before
a byte of its body is buffered, and a body that stalls is given up (408). Raw sockets on a
real server, so nothing between the test and uvicorn reads the body for it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, replace

import httpx2
import pytest

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.vault.service import VaultService
from tests.support import live_server
from tests.support.proxy import settings_for

MIB = 1024 * 1024
REST = "/v1/memory/ingest"
PROXY = "/v1/chat/completions"


@dataclass
class Running:
    host: str
    port: int
    key: str


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, VaultService]]:
    """One server for the module (each test has a vault of its own on it)."""
    # the upstream is never reached: nothing here gets past the body
    settings = settings_for(
        tmp_path_factory.mktemp("bodies"), "http://127.0.0.1:9", body_timeout_seconds=0.5
    )
    server = create_server(settings)
    assert server.service is not None
    with live_server(server.app, lifespan="on") as url:
        origin = httpx2.URL(url)
        assert origin.port is not None
        yield Running(origin.host, origin.port, ""), server.service


@pytest.fixture
def running(shared: tuple[Running, VaultService]) -> Running:
    server, service = shared
    key, _ = service.create_vault()
    return replace(server, key=key)


def held(
    running: Running, path: str, declared: int, key: str | None, sent: int = 1000
) -> socket.socket:
    """A connection that declares a ``declared``-byte JSON body, sends ``sent`` bytes of it
    and stops."""
    sock = socket.create_connection((running.host, running.port), timeout=5)
    head = [
        f"POST {path} HTTP/1.1",
        f"Host: {running.host}:{running.port}",
        "Content-Type: application/json",
        f"Content-Length: {declared}",
    ]
    if key is not None:
        head.append(f"X-Memory-Key: {key}")
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + b"[" * sent)
    return sock


def status_within(sock: socket.socket, seconds: float) -> int | None:
    """The status line's code if the answer starts within ``seconds``, else None."""
    sock.settimeout(seconds)
    received = b""
    try:
        while b"\r\n" not in received:
            chunk = sock.recv(4096)
            if not chunk:
                break
            received += chunk
    except TimeoutError:
        return None
    finally:
        sock.close()
    parts = received.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 else None


@pytest.mark.parametrize(("path", "declared"), [(REST, MIB - 1), (PROXY, 32 * MIB - 1)])
@pytest.mark.parametrize("key", [None, "mk_not_a_key_of_this_server"], ids=["no-key", "unknown"])
def test_a_body_without_a_known_key_is_refused_before_it_is_read(
    running: Running, path: str, declared: int, key: str | None
) -> None:
    # the body never comes: an answer at once is one given without waiting for it
    assert status_within(held(running, path, declared, key), 3.0) == 401


@pytest.mark.parametrize(("path", "declared"), [(REST, 10_000), (PROXY, 10_000)])
def test_a_body_that_stalls_is_given_up_with_408(
    running: Running, path: str, declared: int
) -> None:
    sock = held(running, path, declared, running.key)
    assert status_within(sock, 5.0) == 408


def test_a_whole_body_with_a_key_is_still_served(running: Running) -> None:
    body = {"messages": [{"role": "user", "content": "the heron came back to the pond"}]}
    url = f"http://{running.host}:{running.port}{REST}"
    answer = httpx2.post(url, json=body, headers={"X-Memory-Key": running.key}, timeout=30)
    assert answer.status_code == 202, answer.text


def test_a_body_nested_past_the_parsers_depth_is_relayed_without_memory(
    running: Running,
) -> None:
    """Not a 500 and no traceback: the body is no JSON object the proxy can read, so the
    call goes on without memory (here to an upstream that is not there: 502)."""
    url = f"http://{running.host}:{running.port}{PROXY}"
    headers = {"X-Memory-Key": running.key, "Content-Type": "application/json"}
    answer = httpx2.post(url, content=b"[" * 100_000, headers=headers, timeout=30)
    assert answer.status_code == 502
    assert answer.json()["error"]["code"] == "transport_failure"


def test_a_body_on_a_method_no_route_serves_is_405_not_a_key_refusal(running: Running) -> None:
    """The key is checked first only where a route answers: a PUT on a POST route is the
    router's 405 (with its Allow), whatever key comes with it."""
    url = f"http://{running.host}:{running.port}/v1/memory/search"
    answer = httpx2.put(url, json={"query": "x"}, headers={"X-Memory-Key": "wrong"}, timeout=30)
    assert answer.status_code == 405
    assert "POST" in answer.headers["allow"]
