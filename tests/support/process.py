"""Server processes: start one, wait until it answers, stop it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx2

SERVE_SECONDS = 30


def _serve(
    data_dir: Path, port: int, *, stdout: int | IO[bytes], stderr: int | IO[bytes]
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "MEMORYROUTER_DATA_DIR": str(data_dir), "MEMORYROUTER_EMBEDDINGS": "none"}
    return subprocess.Popen(
        [sys.executable, "-m", "mcp_memoryrouter", "serve", "--port", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
    )


def _wait_healthy(port: int) -> None:
    deadline = time.monotonic() + SERVE_SECONDS
    while True:
        try:
            httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return
        except httpx2.TransportError:
            assert time.monotonic() < deadline, "server did not answer in time"
            time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(timeout=SERVE_SECONDS)
