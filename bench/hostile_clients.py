"""What hostile clients cost a running server: the resident memory of a real ``serve``
process while connections without a memory key send a large body and stop just short of its
end (the chat proxy's 32 MiB and REST's 1 MiB), and the CPU the chat proxy's stream reader
spends on one long server-sent-event line, and the memory it takes to relay a 300 MiB
answer from a provider.

    python bench/hostile_clients.py [--connections 16] [--checkout PATH]

``--checkout`` runs the server of another checkout of this repository (say, an earlier
commit in a ``git worktree``) for a figure side by side with this one. Prints the server's
RSS before, at the peak while the connections are held, and after they close.
"""

from __future__ import annotations

import argparse
import http.server
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table

MIB = 1024 * 1024
HOLD_SECONDS = 5.0


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start(checkout: Path, data_dir: Path, port: int, **settings: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": str(checkout),
        "MEMORYROUTER_DATA_DIR": str(data_dir),
        "MEMORYROUTER_EMBEDDINGS": "none",
        **settings,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_memoryrouter", "serve", "--port", str(port)],
        env=env,
        cwd=checkout,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not start within 60 s")


def stall(port: int, path: str, declared: int, opened: list[socket.socket]) -> None:
    """Declare ``declared`` bytes, send all but the last, and keep the connection open."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    opened.append(sock)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
    ).encode()
    try:
        sock.sendall(head)
        block = b"x" * MIB
        left = declared - 1
        while left > 0:
            sent = sock.send(block[: min(left, MIB)])
            left -= sent
    except OSError:
        pass  # refused and closed by the server: what a fixed server does


def attack(checkout: Path, path: str, declared: int, connections: int) -> tuple[float, ...]:
    port = _free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        proc = start(checkout, Path(data_dir), port)
        try:
            time.sleep(1.0)
            before = rss_mib(proc.pid)
            opened: list[socket.socket] = []
            senders = [
                threading.Thread(target=stall, args=(port, path, declared, opened), daemon=True)
                for _ in range(connections)
            ]
            for sender in senders:
                sender.start()
            peak = before
            ends = time.monotonic() + HOLD_SECONDS
            while time.monotonic() < ends:
                peak = max(peak, rss_mib(proc.pid))
                time.sleep(0.05)
            held = rss_mib(proc.pid)
            for sock in opened:
                sock.close()
            time.sleep(1.0)
            after = rss_mib(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return before, peak, held, after


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class HugeAnswer(http.server.BaseHTTPRequestHandler):
    """An OpenAI-shaped upstream whose answer is ``SIZE`` bytes of JSON."""

    SIZE = 300 * MIB

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        head = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"'
        tail = b'"},"finish_reason":"stop"}]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(self.SIZE))
        self.end_headers()
        self.wfile.write(head)
        left = self.SIZE - len(head) - len(tail)
        block = b"x" * MIB
        while left > 0:
            self.wfile.write(block[: min(left, MIB)])
            left -= min(left, MIB)
        self.wfile.write(tail)

    def log_message(self, *_: object) -> None:
        pass


def huge_answer(checkout: Path) -> tuple[float, float]:
    """The server's RSS before and at the peak while it relays a 300 MiB answer."""
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HugeAnswer)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = _free_port()
    base = f"http://127.0.0.1:{upstream.server_address[1]}/v1"
    with tempfile.TemporaryDirectory() as data_dir:
        proc = start(checkout, Path(data_dir), port, MEMORYROUTER_UPSTREAM_OPENAI_URL=base)
        try:
            time.sleep(1.0)
            key = (Path(data_dir) / "first-run.key").read_text().strip()
            before = rss_mib(proc.pid)
            peak = [before]
            done = threading.Event()

            def sample() -> None:
                while not done.is_set():
                    peak[0] = max(peak[0], rss_mib(proc.pid))
                    time.sleep(0.02)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            body = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
            with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
                sock.sendall(
                    (
                        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                        f"X-Memory-Key: {key}\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                    ).encode()
                    + body
                )
                while sock.recv(MIB):
                    pass
            time.sleep(0.5)
            done.set()
            sampler.join()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            upstream.shutdown()
    return before, peak[0]


def stream_reader_cpu(checkout: Path) -> list[tuple[str, str]]:
    """CPU seconds to read one long SSE line in 4 KiB pieces, in a child of ``checkout``."""
    code = (
        "import time\n"
        "from mcp_memoryrouter.proxy.events import EventReader\n"
        "for mib in (0.25, 1, 4):\n"
        "    line = b'data: ' + b'z' * int(mib * 1048576)\n"
        "    r = EventReader(); t = time.process_time()\n"
        "    for at in range(0, len(line), 4096): r.feed(line[at:at + 4096])\n"
        "    r.feed(b'\\n\\n')\n"
        "    print(mib, round(time.process_time() - t, 3), flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=checkout, capture_output=True, text=True
    )
    return [tuple(line.split()) for line in out.stdout.splitlines()]  # type: ignore[misc]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--checkout", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    rows = []
    for name, path, declared in (
        ("chat proxy, 32 MiB declared", "/v1/chat/completions", 32 * MIB),
        ("REST ingest, 1 MiB declared", "/v1/memory/ingest", MIB),
    ):
        before, peak, held, after = attack(args.checkout, path, declared, args.connections)
        rows.append([name, f"{before:.0f}", f"{peak:.0f}", f"{held:.0f}", f"{after:.0f}"])
    print(f"server {args.checkout}, {args.connections} connections without a key")
    print(table(["attack", "RSS before MiB", "peak", "held", "after close"], rows))
    before, peak = huge_answer(args.checkout)
    print(
        table(
            ["a 300 MiB answer relayed", "RSS before MiB", "peak"],
            [["chat proxy", f"{before:.0f}", f"{peak:.0f}"]],
        )
    )
    cpu = stream_reader_cpu(args.checkout)
    print(table(["SSE line MiB (4 KiB pieces)", "reader CPU s"], [list(r) for r in cpu]))


if __name__ == "__main__":
    main()
