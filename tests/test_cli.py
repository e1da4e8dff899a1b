"""The command line: keys create, serve as a real process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
from click.testing import CliRunner

from mcp_memoryrouter.cli import main
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore


def test_keys_create_json_prints_a_working_key_and_vault(tmp_path: Path) -> None:
    env = {"MEMORYROUTER_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(main, ["keys", "create", "--json", "--name", "ci"], env=env)
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert set(body) == {"key", "vault"}
    assert body["key"].startswith("mk_") and body["vault"].startswith("vr_")
    second = json.loads(CliRunner().invoke(main, ["keys", "create", "--json"], env=env).output)
    assert second["vault"] != body["vault"]


def test_help_explains_each_command() -> None:
    for args in (["--help"], ["serve", "--help"], ["keys", "create", "--help"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0 and "Usage:" in result.output


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_serve_runs_a_real_server_and_prints_the_first_key_once(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "MEMORYROUTER_DATA_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_memoryrouter", "serve", "--port", str(port)],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        while "mk_" not in line:
            line = proc.stderr.readline()
            assert line, "serve exited before printing a key"
        key = line.strip()
        assert key.startswith("mk_")
        deadline = time.monotonic() + 20
        while True:
            try:
                health = httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx2.TransportError:
                assert time.monotonic() < deadline, "server did not answer within 20 s"
                time.sleep(0.1)
        assert health.json()["status"] == "ok"
        response = httpx2.post(
            f"http://127.0.0.1:{port}/v1/memory/ingest",
            json={"messages": [{"content": "hello"}]},
            headers={"Authorization": f"Bearer {key}"},
        )
        assert response.status_code == 202
        # A second serving process on the same data directory (Claude desktop's stdio beside
        # a running server) refuses to start and says what to do, instead of storing
        # memories the running server's in-memory indexes would never see.
        second = subprocess.run(
            [sys.executable, "-m", "mcp_memoryrouter", "stdio"],
            env={**env, "MEMORYROUTER_KEY": key},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 1
        assert f"already served by process {proc.pid}" in second.stderr
        assert "MEMORYROUTER_API_URL" in second.stderr and "Traceback" not in second.stderr
        # Commands that open the store only for a moment still work beside it.
        created = CliRunner().invoke(main, ["keys", "create", "--json"], env=env)
        assert created.exit_code == 0, created.output
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        if proc.stderr is not None:
            proc.stderr.close()
    # The claim ends with the process.
    SQLiteStore(tmp_path / "vault.sqlite3", serving=True).close()
