"""Shared helpers for the benchmarks: a real server process, timing, tables."""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import numpy.typing as npt


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def ok(result: Any) -> dict[str, Any]:
    """An MCP tool result's structured content; an error result raises, naming it."""
    if result.is_error:
        raise RuntimeError(str(result.content)[:300])
    structured: dict[str, Any] = result.structured_content
    return structured


@contextmanager
def started(
    data_dir: Path, extra_env: dict[str, str] | None = None, cwd: Path | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``mcp-memoryrouter serve`` started as its own process on a free loopback port, not
    waited for: its URL and process, terminated afterwards. ``cwd``: run from another
    checkout (``python -m`` puts the working directory first on the path)."""
    port = free_port()
    env = {
        **os.environ,
        "MEMORYROUTER_DATA_DIR": str(data_dir),
        "MEMORYROUTER_RATE_LIMIT_PER_MINUTE": "0",  # a benchmark is one key at full speed
        **(extra_env or {}),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_memoryrouter", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=cwd,
    )
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextmanager
def serving(
    data_dir: Path,
    extra_env: dict[str, str] | None = None,
    cwd: Path | None = None,
    seconds: float = 60,
) -> Iterator[tuple[str, int]]:
    """:func:`started`, once its ``/healthz`` answers (within ``seconds``): URL and pid."""
    with started(data_dir, extra_env, cwd) as (url, proc):
        probe = lambda: httpx2.get(url + "/healthz", timeout=1)  # noqa: E731
        with answering(proc, probe, "server", seconds):
            yield url, proc.pid


@contextmanager
def server(
    data_dir: Path, extra_env: dict[str, str] | None = None, cwd: Path | None = None
) -> Iterator[str]:
    """:func:`serving`'s URL alone."""
    with serving(data_dir, extra_env, cwd) as (url, _):
        yield url


@contextmanager
def embeddings_upstream(
    embed: Callable[[Sequence[str]], npt.NDArray[np.float32]], model: str
) -> Iterator[str]:
    """An instant embedding service for the ``openai`` embedder: ``POST /v1/embeddings`` in
    the OpenAI shape, answered with ``embed``'s vectors, on a loopback port of its own."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            data = [
                {"index": i, "embedding": v, "object": "embedding"}
                for i, v in enumerate(embed(texts).round(5).tolist())
            ]
            payload = json.dumps({"data": data, "model": model}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *_: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


@contextmanager
def answering(
    proc: subprocess.Popen[bytes], probe: Callable[[], object], name: str, seconds: float
) -> Iterator[None]:
    """``proc`` once ``probe`` gets through (within ``seconds``), terminated afterwards."""
    try:
        deadline = time.monotonic() + seconds
        while True:
            try:
                probe()
                break
            except httpx2.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"{name} did not start") from None
                time.sleep(0.05)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def new_vault(data_dir: Path, name: str, cwd: Path | None = None) -> str:
    """A fresh vault's first key, minted by the CLI beside the running server (``cwd``: by
    another checkout's, as :func:`server`)."""
    out = subprocess.run(
        [sys.executable, "-m", "mcp_memoryrouter", "keys", "create", "--json", "--name", name],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "MEMORYROUTER_DATA_DIR": str(data_dir)},
        cwd=cwd,
    )
    key: str = json.loads(out.stdout)["key"]
    return key


def code_version() -> str:
    """The commit the server runs from, flagged when its package has uncommitted changes."""
    git = ["git", "-C", str(Path(__file__).resolve().parents[1])]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "mcp_memoryrouter"], capture_output=True, text=True
    )
    return head.stdout.strip() + (" + uncommitted changes" if dirty.stdout.strip() else "")


def processes() -> dict[int, tuple[int, str]]:
    """Every process of the machine: pid -> (parent pid, command line), from /proc."""
    found: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        found[int(entry.name)] = (parent, cmdline)
    return found


def rss_bytes(pid: int) -> int:
    """Resident memory (VmRSS) of one process; 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def timed(fn: Callable[[], object], samples: int) -> list[float]:
    """Wall milliseconds of ``samples`` calls."""
    out = []
    for _ in range(samples):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def p50(values: list[float]) -> float:
    return statistics.median(values)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = [
        "| " + " | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows
    ]
    return "\n".join([line, sep, *body])
