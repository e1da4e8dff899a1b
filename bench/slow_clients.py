"""What slow clients do to a running server: /healthz latency while thousands of connections
are held open, half sending nothing, half half a request head (slowloris).

    python bench/slow_clients.py [--connections 3000 20000] [--seconds 10] [--checkout PATH]

For each count, one real ``mcp-memoryrouter serve`` process (``--checkout``: the server of
another checkout of this repository, say an earlier commit in a ``git worktree``, for a
figure side by side) is flooded by holder processes (at most 5,000 connections each, each
from its own loopback source address so the ephemeral ports suffice), while /healthz is
asked every 100 ms, on a new connection each time with a 2 s timeout, from the start of the
flood until ``--seconds`` after it is all open. Prints the p50 and the slowest answer, the
probes that got no answer within 2 s, and what the server wrote to its log meanwhile.
"""

from __future__ import annotations

import argparse
import os
import resource
import select
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, free_port, p50, table

PER_HOLDER = 5000
PROBE_TIMEOUT = 2.0
HALF_A_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow"


def hold(port: int, count: int, source: str) -> None:
    """A holder process: open ``count`` connections from ``source``, say so, keep them until
    stdin closes."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    held, failed = [], 0
    target = ("127.0.0.1", port)
    for i in range(count):
        try:
            sock = socket.create_connection(target, timeout=3, source_address=(source, 0))
            if i % 2:
                sock.sendall(HALF_A_HEAD)
            held.append(sock)
        except OSError:
            failed += 1
    print(f"opened {len(held)} failed {failed}", flush=True)
    sys.stdin.read()


def start_server(checkout: Path, data_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "MEMORYROUTER_DATA_DIR": str(data_dir), "MEMORYROUTER_EMBEDDINGS": "none"}
    env["PYTHONPATH"] = str(checkout)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_memoryrouter", "serve", "--port", str(port)],
            cwd=checkout,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return proc
        except httpx2.TransportError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the server did not start") from None
            time.sleep(0.1)


def probe(url: str) -> float | None:
    """Milliseconds to a 200 from /healthz on a new connection, None without one in time."""
    start = time.perf_counter()
    try:
        response = httpx2.get(url, timeout=PROBE_TIMEOUT)
    except httpx2.TransportError:
        return None
    return (time.perf_counter() - start) * 1000 if response.status_code == 200 else None


def flood(checkout: Path, connections: int, seconds: float) -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        log = Path(folder) / "serve.log"
        server = start_server(checkout, Path(folder) / "data", port, log)
        holders: list[subprocess.Popen[str]] = []
        try:
            for n, first in enumerate(range(0, connections, PER_HOLDER)):
                count = min(PER_HOLDER, connections - first)
                command = [sys.executable, __file__, "--hold", str(port), str(count)]
                holders.append(
                    subprocess.Popen(
                        [*command, f"127.0.0.{n + 2}"],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                )
            answers: list[float | None] = []
            said: dict[int, str] = {}
            done_at: float | None = None
            url = f"http://127.0.0.1:{port}/healthz"
            while done_at is None or time.monotonic() < done_at + seconds:
                answers.append(probe(url))
                time.sleep(0.1)
                if done_at is None and reports(holders, said):
                    done_at = time.monotonic()
        finally:
            for holder in holders:
                if holder.stdin is not None:
                    holder.stdin.close()
                holder.wait(timeout=60)
            server.terminate()
            server.wait(timeout=60)
        text = log.read_text(errors="replace")
    times = [a for a in answers if a is not None]
    return [
        f"{connections:,}",
        f"{p50(times):.1f}" if times else "-",
        f"{max(times):.1f}" if times else "-",
        f"{answers.count(None)}/{len(answers)}",
        f"{len(text.encode()) / 1024:.0f} KiB",
        str(text.count("Traceback")),
        "; ".join(said[i] for i in sorted(said)),
    ]


def reports(holders: list[subprocess.Popen[str]], said: dict[int, str]) -> bool:
    """Read what holders that finished opening said (one line each); True once all have."""
    for i, holder in enumerate(holders):
        assert holder.stdout is not None
        if i not in said and select.select([holder.stdout], [], [], 0)[0]:
            said[i] = holder.stdout.readline().strip()
    return len(said) == len(holders)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--hold":
        hold(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, nargs="+", default=[3000, 20000])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--checkout", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)
    print(f"server from {args.checkout} ({code_version()} here); open-file limit {limit}")
    rows = [flood(args.checkout, n, args.seconds) for n in args.connections]
    headers = ["held", "p50 ms", "max ms", "no answer", "log", "tracebacks", "holders"]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
