"""The provider's key never reaches a log line, also when the app sends it the way Google's
clients can: as ``?key=`` in the URL, which uvicorn's access log writes. A real ``serve``
process, its output read as an operator's log would keep it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs

import httpx2

from mcp_memoryrouter.accesslog import redacted
from mcp_memoryrouter.startup import FIRST_KEY_FILE
from tests.proxy.upstream import Upstream
from tests.support import free_port, live_server
from tests.support.process import _stop, _wait_healthy

GOOGLE_KEY = "AIzaSyD-provider-secret-91c3"
BODY = {"contents": [{"role": "user", "parts": [{"text": "what is the tide table today?"}]}]}


def test_a_google_key_in_the_query_string_is_relayed_but_never_logged(tmp_path: Path) -> None:
    double = Upstream()
    port = free_port()
    log = tmp_path / "serve.log"
    with live_server(double) as upstream_url, log.open("wb") as out:
        env = {
            **os.environ,
            "MEMORYROUTER_DATA_DIR": str(tmp_path / "data"),
            "MEMORYROUTER_EMBEDDINGS": "none",
            "MEMORYROUTER_UPSTREAM_GOOGLE_URL": upstream_url,
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_memoryrouter", "serve", "--port", str(port)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
        try:
            _wait_healthy(port)
            key = (tmp_path / "data" / FIRST_KEY_FILE).read_text().strip()
            for path in (
                "/v1beta/models/m:generateContent",
                "/v1beta/models/m:streamGenerateContent?alt=sse",
            ):
                mark = "&" if "?" in path else "?"
                answer = httpx2.post(
                    f"http://127.0.0.1:{port}{path}{mark}key={GOOGLE_KEY}",
                    json=BODY,
                    headers={"X-Memory-Key": key},
                    timeout=30,
                )
                assert answer.status_code == 200, answer.text
        finally:
            _stop(proc)
    relayed = [parse_qs(r.query).get("key") for r in double.received]
    assert relayed == [[GOOGLE_KEY], [GOOGLE_KEY]]
    text = log.read_text()
    assert ":generateContent?key=[redacted]" in text  # the request was logged...
    assert GOOGLE_KEY not in text  # ...without its key


def test_only_the_values_of_secret_parameters_are_replaced() -> None:
    assert redacted("/v1beta/models/m:x?alt=sse&KEY=abc&%6Bey=d&keys=e&code=f") == (
        "/v1beta/models/m:x?alt=sse&KEY=[redacted]&%6Bey=[redacted]&keys=e&code=[redacted]"
    )
    assert redacted("/healthz") == "/healthz"
