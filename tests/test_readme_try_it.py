"""The README's "Try it" runs as written against a real ``serve``: a few memories stored, a
model (the model double standing in for ``claude -p``) writes their reflections now, below
the server's threshold, and the explorer shows them. Its ChatGPT import line runs as written
too (the key from the file it names)."""

from __future__ import annotations

import html
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from mcp_memoryrouter.startup import FIRST_KEY_FILE
from tests.support import free_port
from tests.support.reflect import PROGRAM, chatgpt_zip

README = Path(__file__).resolve().parents[1] / "README.md"
SERVE_SECONDS = 30
COMMAND_SECONDS = 120
KEY_PLACEHOLDER = "<your memory key>"
README_MODEL = '--model-cmd "claude -p"'
README_SERVER = "http://127.0.0.1:8787"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Served:
    """``mcp-memoryrouter serve`` as the install step leaves it: a person's home, the default
    data directory, the first key in the file ``serve`` writes without a terminal."""

    url: str
    key: str
    env: dict[str, str]  # a person's shell: the program on PATH, their HOME

    def api(self, method: str, path: str, body: object = None) -> dict[str, object]:
        headers = {"Authorization": f"Bearer {self.key}"}
        answer = httpx2.request(method, self.url + path, headers=headers, json=body)
        assert answer.status_code < 300, answer.text
        found: dict[str, object] = answer.json()
        return found


def _shell(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MEMORYROUTER_"))}
    path = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env | {"HOME": str(home), "PATH": path, "MEMORYROUTER_EMBEDDINGS": "none"}


def _wait_healthy(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + SERVE_SECONDS
    while True:
        assert server.poll() is None, log.read_text()
        try:
            httpx2.get(url + "/healthz", timeout=2)
            return
        except httpx2.TransportError:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    env = _shell(home)
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "mcp_memoryrouter", "serve", "--port", str(port)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_healthy(url, server, log)
            key_file = home / ".local/share/mcp-memoryrouter" / FIRST_KEY_FILE
            # the CLI's documented setting: the README's commands keep their default address
            yield Served(url, key_file.read_text().strip(), env | {"MEMORYROUTER_API_URL": url})
        finally:
            server.terminate()
            server.wait(timeout=SERVE_SECONDS)


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def _section(title: str) -> str:
    return _readme().split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _try_it() -> tuple[str, str]:
    """The section's one bash block, and the prose after it."""
    section = _section("Try it")
    _, block, after = section.split("```", 2)
    assert block.startswith("bash\n")
    return block.removeprefix("bash\n"), after.split("```", 1)[0]


def _run(script: str, served: Served, cwd: Path, **env: str) -> None:
    done = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=cwd,
        env=served.env | env,
        capture_output=True,
        text=True,
        timeout=COMMAND_SECONDS,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@contextmanager
def _signed_in(url: str, key: str) -> Iterator[httpx2.Client]:
    """The explorer as a browser has it after the sign-in form (its cookie kept)."""
    with httpx2.Client(base_url=url, follow_redirects=False, timeout=30) as browser:
        token = CSRF.search(browser.get("/ui/sign-in").text)
        assert token
        answer = browser.post("/ui/sign-in", data={"csrf": token.group(1), "key": key})
        assert answer.status_code == 303, answer.text
        yield browser


def test_the_readmes_try_it_makes_reflections_now_and_the_explorer_shows_them(
    served: Served, tmp_path: Path
) -> None:
    script, after = _try_it()
    # the two things a person fills in: their key, and their model (here the model double)
    assert script.count(KEY_PLACEHOLDER) == 1 and script.count(README_MODEL) == 1
    double = shlex.quote(f"{shlex.quote(sys.executable)} {shlex.quote(str(PROGRAM))}")
    script = script.replace(KEY_PLACEHOLDER, served.key)
    script = script.replace(README_MODEL, f"--model-cmd {double}")
    work = tmp_path / "work"
    work.mkdir()
    model_log = tmp_path / "model-inputs.log"
    _run(script, served, work, REFLECT_TEST_LOG=str(model_log))

    stats = served.api("GET", "/v1/memory/stats")
    debt = stats["reflection"]
    assert isinstance(debt, dict) and debt["suggestion"] is None  # far below the threshold
    assert debt["unconsolidated"]["raw"]["units"] == 0  # yet nothing waits: all consolidated
    tiers = stats["tiers"]
    assert isinstance(tiers, dict) and tiers["1"]["count"] == 3
    assert tiers["2"]["count"] > 0 and tiers["3"]["count"] > 0
    everything = {"from": "0001-01-01", "tiers": [2]}
    reflections = served.api("POST", "/v1/memory/date-search", everything)["memories"]
    assert isinstance(reflections, list) and reflections

    # "Then open http://127.0.0.1:8787/ui": the same page of this server
    assert f"`{README_SERVER}/ui`" in after
    with _signed_in(served.url, served.key) as browser:
        overview = browser.get("/ui")
        timeline = browser.get("/ui/timeline", params={"tier": "2"})
    assert overview.status_code == timeline.status_code == 200
    for row in reflections:
        assert html.escape(row["content"], quote=False) in timeline.text


def test_the_readmes_chatgpt_import_line_runs_as_written(served: Served, tmp_path: Path) -> None:
    (line,) = re.findall(r"`(mcp-memoryrouter import [^`]*--from chatgpt[^`]*)`", _readme())
    work = tmp_path / "work"
    work.mkdir()
    words = shlex.split(line)
    chatgpt_zip(work / words[-1])  # the zip the data export sends, as it is
    if "--key-file" in words:  # the file it names: the key, readable by its owner alone
        key_file = work / words[words.index("--key-file") + 1]
        key_file.write_text(served.key + "\n", encoding="utf-8")
        key_file.chmod(0o600)
    _run(line, served, work)
    stats = served.api("GET", "/v1/memory/stats")
    tiers = stats["tiers"]
    assert isinstance(tiers, dict) and tiers["1"]["count"] > 0
