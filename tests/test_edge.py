"""The connections a real ``mcp-memoryrouter serve`` accepts, on loopback: forwarding
headers name the client only from a proxy the operator named (uvicorn's default trusts any
loopback peer), a request head and body each have a deadline, and a flood of idle or
trickling connections past the open-file limit leaves ``/healthz`` answering in under a
second, with no traceback per refused ``accept()``."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from mcp_memoryrouter.cli import edge_notes
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.edge.connections import (
    ConnectionLimits,
    Doorway,
    GuardedH11,
    Sparing,
    room_for,
    spare_accept_failures,
    trusted_forms,
)
from tests.support import free_port

START_SECONDS = 30
REGISTRATION = {
    "client_name": "Edge test client",
    "redirect_uris": ["http://127.0.0.1:7777/callback"],
    "token_endpoint_auth_method": "none",
}
REGISTER_BURST = 10  # MEMORYROUTER_OAUTH_REGISTER_BURST's default
# a server process whose open files the test limits (a hard limit it cannot raise), so that
# the flood below is more than it could ever hold open
LIMITED = (
    "import resource, runpy, sys; "
    "resource.setrlimit(resource.RLIMIT_NOFILE, ({files}, {files})); "
    "sys.argv = ['mcp-memoryrouter', *sys.argv[1:]]; "
    "runpy.run_module('mcp_memoryrouter', run_name='__main__')"
)


@dataclass
class Served:
    base: str
    port: int
    log: Path

    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


@contextmanager
def serve(tmp_path: Path, *, open_files: int | None = None, **env: str) -> Iterator[Served]:
    """``mcp-memoryrouter serve`` in its own process on a free loopback port."""
    port = free_port()
    environment = {
        **os.environ,
        "MEMORYROUTER_DATA_DIR": str(tmp_path / "data"),
        "MEMORYROUTER_EMBEDDINGS": "none",
        **{f"MEMORYROUTER_{name.upper()}": value for name, value in env.items()},
    }
    environment.pop("FORWARDED_ALLOW_IPS", None)
    command = [sys.executable, "-m", "mcp_memoryrouter"]
    if open_files is not None:
        command = [sys.executable, "-c", LIMITED.format(files=open_files)]
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, "serve", "--port", str(port)],
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert process.poll() is None, log.read_text()
            try:
                httpx2.get(base + "/healthz", timeout=2)
                break
            except httpx2.TransportError:
                assert time.monotonic() < deadline, "serve did not answer in time"
                time.sleep(0.1)
        yield Served(base, port, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=START_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- forwarding headers ---------------------------------------------------------------------


def register(base: str, forged: str) -> int:
    response = httpx2.post(
        base + "/register", json=REGISTRATION, headers={"X-Forwarded-For": forged}, timeout=10
    )
    return response.status_code


def sign_in(base: str, forged: str) -> int:
    """A wrong key on the explorer's sign-in form, from ``forged`` by its header."""
    with httpx2.Client(base_url=base, timeout=10, headers={"X-Forwarded-For": forged}) as b:
        page = b.get("/ui/sign-in").text
        token = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        return b.post("/ui/sign-in", data={"csrf": token, "key": "mk_guess"}).status_code


def test_a_forged_forwarding_header_is_not_a_new_address_by_default(tmp_path: Path) -> None:
    """uvicorn's defaults would take X-Forwarded-For from any loopback peer: a new forged
    address per request would have a new budget each."""
    with serve(tmp_path) as s:
        registrations = [register(s.base, f"198.51.100.{i}") for i in range(REGISTER_BURST + 1)]
        sign_ins = [sign_in(s.base, f"203.0.113.{i}") for i in range(11)]
    assert registrations == [201] * REGISTER_BURST + [429]
    assert sign_ins == [401] * 10 + [429]


def test_a_named_proxys_forwarding_header_names_the_client(tmp_path: Path) -> None:
    with serve(tmp_path, trusted_proxies='["127.0.0.1"]') as s:
        apart = [register(s.base, f"198.51.100.{i}") for i in range(REGISTER_BURST + 2)]
        one = [register(s.base, "203.0.113.7") for _ in range(REGISTER_BURST + 1)]
    assert apart == [201] * (REGISTER_BURST + 2)  # each client its own budget
    assert one == [201] * REGISTER_BURST + [429]


def test_a_setting_that_is_not_an_address_stops_serve_with_its_name(tmp_path: Path) -> None:
    env = {**os.environ, "MEMORYROUTER_DATA_DIR": str(tmp_path)}
    env["MEMORYROUTER_TRUSTED_PROXIES"] = '["10.0.0.1/8"]'
    done = subprocess.run(
        [sys.executable, "-m", "mcp_memoryrouter", "serve", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "MEMORYROUTER_TRUSTED_PROXIES" in done.stderr and "Traceback" not in done.stderr


# --- slow clients ---------------------------------------------------------------------------

HALF_A_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow"


def answer_of(sock: socket.socket, within: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and when it closed (seconds from now)."""
    start = time.monotonic()
    sock.settimeout(within)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received, time.monotonic() - start


def healthz_seconds(base: str) -> float:
    start = time.monotonic()
    response = httpx2.get(base + "/healthz", timeout=1.0)
    assert response.status_code == 200
    return time.monotonic() - start


@pytest.fixture
def many_files() -> Iterator[None]:
    """This process may hold the flood's sockets (up to 4096)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4096 if hard == resource.RLIM_INFINITY else min(4096, hard)
    if wanted < 2048:
        pytest.skip(f"the open-file limit ({hard}) cannot hold the flood")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.usefixtures("many_files")
def test_healthz_answers_through_more_idle_connections_than_the_server_can_hold(
    tmp_path: Path,
) -> None:
    """3,000 connections, half sending nothing, half half a head, against a server allowed
    2,048 open files: the oldest idle ones are closed to let each new one in."""
    held: list[socket.socket] = []
    seconds: list[float] = []
    with serve(tmp_path, open_files=2048) as s:
        try:
            for i in range(3000):
                sock = socket.create_connection(s.address(), timeout=5)
                if i % 2:
                    sock.sendall(HALF_A_HEAD)
                held.append(sock)
                if i % 500 == 499:
                    seconds.append(healthz_seconds(s.base))
            seconds.append(healthz_seconds(s.base))
            first, waited = answer_of(held[0], within=5)
        finally:
            for sock in held:
                sock.close()
        log = s.log.read_text(errors="replace")
    # under a second on a quiet machine; 2 s leaves room for a loaded one, while the code
    # before this answered nothing at all past the descriptor limit
    assert len(seconds) == 7 and max(seconds) < 2.0, seconds
    assert first == b"" and waited < 5  # the oldest connection was closed to make room
    assert "Traceback" not in log and len(log) < 64_000


def test_a_connection_has_a_deadline_for_its_head_and_its_body(tmp_path: Path) -> None:
    with serve(tmp_path, head_timeout_seconds="1", body_timeout_seconds="1") as s:
        with socket.create_connection(s.address(), timeout=5) as half:
            half.sendall(HALF_A_HEAD)
            partial, partial_closed = answer_of(half, within=10)
        with socket.create_connection(s.address(), timeout=5) as silent:
            nothing, silent_closed = answer_of(silent, within=10)
        with socket.create_connection(s.address(), timeout=5) as stalled:
            stalled.sendall(
                b"POST /register HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"client'
            )
            body, body_closed = answer_of(stalled, within=10)
        with socket.create_connection(s.address(), timeout=5) as trickle:
            # a whole request, then the next head a byte at a time: bytes do not buy time
            trickle.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            first = trickle.recv(65536)
            start = time.monotonic()
            try:
                for byte in b"GET /healthz HTTP/1.1\r\n":
                    trickle.sendall(bytes([byte]))
                    time.sleep(0.1)
            except (BrokenPipeError, ConnectionResetError):
                pass
            _, trickle_closed = answer_of(trickle, within=10)
            trickle_closed += time.monotonic() - start
    assert partial.startswith(b"HTTP/1.1 408 ") and 0.5 < partial_closed < 5
    assert nothing == b"" and 0.5 < silent_closed < 5
    assert body.startswith(b"HTTP/1.1 408 ") and 0.5 < body_closed < 5
    assert first.startswith(b"HTTP/1.1 200 ") and trickle_closed < 3


# --- the rules, in process ------------------------------------------------------------------


def test_serve_says_at_start_who_reaches_it_and_through_what(tmp_path: Path) -> None:
    keyless = "\n".join(edge_notes(Settings(data_dir=tmp_path, auth="none")))
    assert "MEMORYROUTER_AUTH=none" in keyless and "MEMORYROUTER_AUTH=key" in keyless
    exposed = "\n".join(edge_notes(Settings(data_dir=tmp_path, host="0.0.0.0")))
    assert "0.0.0.0: reachable beyond this machine" in exposed
    assert "MEMORYROUTER_TRUSTED_PROXIES" in exposed and "MEMORYROUTER_METRICS_TOKEN" in exposed
    behind = "\n".join(edge_notes(Settings(data_dir=tmp_path, trusted_proxies=["10.0.0.5"])))
    assert "10.0.0.5/32" in behind and "beyond this machine" not in behind


class Waiter(GuardedH11):
    """Only what the doorway touches: closing, and being told apart."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    def close_for_room(self) -> None:
        self.closed = True
        self.doorway.leaves(self)


def test_the_doorway_closes_the_longest_waiting_connection_never_a_busy_one() -> None:
    doorway = Doorway(ConnectionLimits(10, 60, most=3), Sparing(clock=lambda: 0.0))
    Waiter.doorway = doorway
    a, b, c, d, e = (Waiter(n) for n in "abcde")
    for connection in (a, b, c):
        assert doorway.admit(connection)
        doorway.waits(connection)
    doorway.works(a)  # a sent its head: busy, not to be closed
    doorway.waits(b)  # b finished a response and waits again: the newest waiter
    assert doorway.admit(d) and c.closed and not a.closed and not b.closed
    doorway.works(b)
    doorway.works(d)
    assert not doorway.admit(e)  # every open connection busy: the new one is refused
    assert doorway.open == {a, b, d} and doorway.closed_for_room == 1


def test_the_connection_cap_leaves_room_for_the_process_below_the_open_file_limit() -> None:
    assert room_for(2048, 1 << 20).connections == 2048
    small = room_for(2048, 512)
    assert small.connections + small.backlog <= 512 - 256 and small.backlog >= 64


def test_a_trusted_ipv4_proxy_is_trusted_as_a_dual_stack_socket_reports_it_too() -> None:
    proxies = [ipaddress.ip_network("10.0.0.5"), ipaddress.ip_network("fd00::/8")]
    forms = trusted_forms(proxies)
    assert forms == ["10.0.0.5/32", "::ffff:10.0.0.5/128", "fd00::/8"]
    trusted = ProxyHeadersMiddleware(app=None, trusted_hosts=forms).trusted_hosts  # type: ignore[arg-type]
    assert "::ffff:10.0.0.5" in trusted and "10.0.0.5" in trusted
    assert "::ffff:10.0.0.6" not in trusted and "127.0.0.1" not in trusted


def test_a_repeated_warning_is_one_line_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    sparing = Sparing(60, clock=lambda: now[0])
    logged = [sparing.warning("accept", "cannot accept") for _ in range(500)]
    now[0] = 61
    assert sparing.warning("accept", "cannot accept")
    assert logged.count(True) == 1
    assert len(caplog.records) == 2 and "499 more" in caplog.records[1].getMessage()


def test_an_accept_failure_for_want_of_files_is_a_warning_not_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        spare_accept_failures(loop, Sparing(clock=lambda: 0.0))
        for _ in range(100):
            exc = OSError(24, "Too many open files")
            context = {"message": "out", "exception": exc, "socket": object()}
            loop.call_exception_handler(context)

    asyncio.run(main())
    assert len(caplog.records) == 1
    assert caplog.records[0].exc_info is None and "MEMORYROUTER_MAX_CONNECTIONS" in caplog.text
