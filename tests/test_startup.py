"""What a person sees when the server starts: URLs, the data directory, the first key only
on a terminal, the next step for each client; and a stdio server with a bad key stops at once
with one line that says what to do."""

from __future__ import annotations

import os
import pty
import select
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcp_memoryrouter.startup import FIRST_KEY_FILE, stdio_command
from tests.support import free_port
from tests.support.process import SERVE_SECONDS, _serve, _stop, _wait_healthy


def test_first_key_goes_to_a_0600_file_when_the_output_is_not_a_terminal(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = _serve(tmp_path / "data", port, stderr=out, stdout=out)
        try:
            _wait_healthy(port)
        finally:
            _stop(proc)
    text = log.read_text()
    key_file = tmp_path / "data" / FIRST_KEY_FILE
    key = key_file.read_text().strip()
    assert key.startswith("mk_")
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert key not in text  # a service manager keeps this output in its log
    assert str(key_file) in text
    # where it listens, where the data is, and a next step for each client
    assert f"http://127.0.0.1:{port}/mcp" in text
    assert str(tmp_path / "data") in text
    for client in ("MCP Inspector", "Claude Code", "Claude desktop", "claude.ai"):
        assert client in text
    # the desktop snippet names the program by its absolute path, not a bare command
    assert f'"command": "{sys.executable}"' in text


def test_first_key_is_shown_on_a_terminal_and_not_written(tmp_path: Path) -> None:
    port = free_port()
    leader, follower = pty.openpty()
    proc = _serve(tmp_path, port, stderr=follower, stdout=subprocess.DEVNULL)
    os.close(follower)
    seen = b""
    try:
        deadline = time.monotonic() + SERVE_SECONDS
        while b"Claude desktop" not in seen:
            assert time.monotonic() < deadline, seen.decode(errors="replace")
            ready, _, _ = select.select([leader], [], [], 1.0)
            if ready:
                seen += os.read(leader, 65536)
    finally:
        _stop(proc)
        os.close(leader)
    text = seen.decode()
    assert "shown only now" in text
    key = next(word for word in text.split() if word.startswith("mk_"))
    assert len(key) > 40
    assert not (tmp_path / FIRST_KEY_FILE).exists()
    # the snippets carry the key just shown, so nobody pastes it twice
    assert f'"MEMORYROUTER_KEY": "{key}"' in text


def test_stdio_command_is_absolute_for_the_installed_script_and_for_python_m(
    tmp_path: Path,
) -> None:
    script = tmp_path / "bin" / "mcp-memoryrouter"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    assert stdio_command(str(script), "/usr/bin/python3") == (str(script), "stdio")
    assert stdio_command("/x/mcp_memoryrouter/__main__.py", "/venv/bin/python") == (
        "/venv/bin/python",
        "-m",
        "mcp_memoryrouter",
        "stdio",
    )


def _stdio(tmp_path: Path, key: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "MEMORYROUTER_DATA_DIR": str(tmp_path),
        "MEMORYROUTER_EMBEDDINGS": "none",
        "MEMORYROUTER_KEY": key,
        "PYTHONIOENCODING": "ascii",  # a terminal that cannot print "…" must not matter
    }
    return subprocess.run(
        [sys.executable, "-m", "mcp_memoryrouter", "stdio"],
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=SERVE_SECONDS,
        check=False,
    )


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("mk_…", "is not a memory key"),  # the README's placeholder, pasted as it is
        ("not-a-key", "is not a memory key"),
        ("mk_" + "A" * 43, "unknown or revoked"),
        ("mk_" + "A" * 43 + ":read", "unknown or revoked"),
    ],
)
def test_stdio_with_a_bad_key_stops_at_start_with_one_line(
    tmp_path: Path, key: str, says: str
) -> None:
    result = _stdio(tmp_path, key)
    assert result.returncode == 1
    assert says in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""  # nothing was served
    assert len(result.stderr.strip().splitlines()) == 1
