"""The Dockerfile's own command, environment and healthcheck, run exactly as written.

This test needs no container engine (``.ci/docker`` builds and runs the image itself): it
reads the ENV, CMD and HEALTHCHECK instructions and runs them as the container would (with the
data directory, the model cache, the temporary files and the port moved to test places).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import time
from pathlib import Path

from mcp_memoryrouter.config import Settings

DOCKERFILE = Path(__file__).resolve().parents[1] / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def env_of() -> dict[str, str]:
    env: dict[str, str] = {}
    for word, rest in instructions():
        if word == "ENV":
            for item in shlex.split(rest):
                key, _, value = item.partition("=")
                env[key] = value
    return env


def exec_form(rest: str) -> list[str]:
    value = json.loads(rest)
    assert isinstance(value, list)
    return [str(v) for v in value]


def test_the_image_is_slim_runs_as_a_non_root_user_and_keeps_data_in_a_volume() -> None:
    found = dict(instructions())
    assert re.fullmatch(r"python:3\.1[1-9]-slim", found["FROM"])
    assert found["USER"] not in ("root", "0")
    assert json.loads(found["VOLUME"]) == [env_of()["MEMORYROUTER_DATA_DIR"]]
    assert env_of()["MEMORYROUTER_HOST"] == "0.0.0.0"


def test_the_container_command_serves_and_its_healthcheck_passes(tmp_path: Path) -> None:
    found = dict(instructions())
    command = exec_form(found["CMD"])
    health = exec_form(found["HEALTHCHECK"].split("CMD", 1)[1].strip())
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **os.environ,
        **env_of(),
        "MEMORYROUTER_DATA_DIR": str(tmp_path),
        "MEMORYROUTER_PORT": str(port),
        # the model this machine already built, not the image's folder
        "MEMORYROUTER_CACHE_DIR": str(Settings().cache_dir),
        "TMPDIR": str(tmp_path),
    }
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while subprocess.run(health, env=env, capture_output=True).returncode != 0:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "healthcheck never passed"
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
    assert "Created vault" in (tmp_path / "serve.log").read_text()


def test_the_image_is_built_to_start_read_only_in_512_mib_from_pinned_versions() -> None:
    """What .ci/docker checks on the built image, read here from the Dockerfile itself: the
    model is built at build time outside the volume, temporary files go to the volume, the
    install is pinned and carries the PostgreSQL driver, the example is a public one."""
    found = instructions()
    env = env_of()
    volume = json.loads(dict(found)["VOLUME"])[0]
    assert not env["MEMORYROUTER_CACHE_DIR"].startswith(volume)
    assert env["TMPDIR"] == volume
    runs = " ".join(rest for word, rest in found if word == "RUN")
    assert ".prepare()" in runs
    assert "-c /tmp/build/constraints.txt" in runs and "[postgres]" in runs
    examples = DOCKERFILE.read_text().split("FROM", 1)[0]
    assert "MEMORYROUTER_PUBLIC_URL=https://" in examples
    assert "MEMORYROUTER_DATABASE_URL=postgresql://" in examples
    ignored = (DOCKERFILE.parent / ".dockerignore").read_text().splitlines()
    assert "*" in ignored and "!mcp_memoryrouter/" in ignored  # only what COPY names
