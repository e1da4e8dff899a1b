"""The README's public-HTTPS recipe, run for real: Debian's Caddy in front of a uvicorn
server, with Caddy's internal certificate authority standing in for a public one. A client
that trusts only that authority discovers the server, registers, signs in and calls a tool,
all over TLS, and every URL the server hands out is the public https one.

Skipped where /usr/bin/caddy is missing, unless MEMORYROUTER_TEST_CADDY=1 (CI), where a
missing Caddy is a failure.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.config import Settings
from tests.support import free_port
from tests.support.mcp import ok
from tests.support.oauth import Browser, Flow, serve

CADDY = shutil.which("caddy") or "/usr/bin/caddy"
REQUIRED = os.environ.get("MEMORYROUTER_TEST_CADDY", "").strip() == "1"
START_SECONDS = 30

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not REQUIRED and not Path(CADDY).exists(), reason="needs Caddy (apt-get install caddy)"
    ),
]


@dataclass
class Proxied:
    public_url: str  # https://localhost:PORT, through Caddy
    key: str
    tls: ssl.SSLContext  # trusts Caddy's internal authority only

    @property
    def mcp_url(self) -> str:
        return self.public_url + "/mcp"


def _caddyfile(tmp: Path, https_port: int, http_port: int, upstream: int) -> Path:
    path = tmp / "Caddyfile"
    path.write_text(
        "{\n"
        "\tadmin off\n"
        "\tskip_install_trust\n"
        f"\thttp_port {http_port}\n"
        f"\thttps_port {https_port}\n"
        f"\tstorage file_system {{\n\t\troot {tmp / 'caddy-data'}\n\t}}\n"
        "}\n"
        f"localhost:{https_port} {{\n"
        "\ttls internal\n"
        f"\treverse_proxy 127.0.0.1:{upstream}\n"
        "}\n"
    )
    return path


def _wait_for_authority(root: Path, proc: subprocess.Popen[bytes], log: Path) -> ssl.SSLContext:
    deadline = time.monotonic() + START_SECONDS
    while not root.exists():
        assert proc.poll() is None, f"caddy exited: {log.read_text()[-2000:]}"
        assert time.monotonic() < deadline, f"caddy made no authority: {log.read_text()[-2000:]}"
        time.sleep(0.1)
    return ssl.create_default_context(cafile=str(root))


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[Proxied]:
    if not Path(CADDY).exists():
        pytest.fail("MEMORYROUTER_TEST_CADDY=1 but Caddy is not installed")
    https_port, http_port = free_port(), free_port()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    upstream = sock.getsockname()[1]
    public_url = f"https://localhost:{https_port}"
    config = Settings(data_dir=tmp_path / "data", embeddings="none", public_url=public_url)
    server = create_server(config)
    assert server.service is not None
    key, _ = server.service.create_vault(name="tls")
    log = tmp_path / "caddy.log"
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    with serve(server.app, sock), log.open("wb") as out:
        caddyfile = _caddyfile(tmp_path, https_port, http_port, upstream)
        proc = subprocess.Popen(
            [CADDY, "run", "--config", str(caddyfile), "--adapter", "caddyfile"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:
            root = tmp_path / "caddy-data" / "pki" / "authorities" / "local" / "root.crt"
            tls = _wait_for_authority(root, proc, log)
            _wait_for_tls(public_url, tls)
            yield Proxied(public_url, key, tls)
        finally:
            proc.terminate()
            proc.wait(timeout=START_SECONDS)


def _wait_for_tls(url: str, tls: ssl.SSLContext) -> None:
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            httpx2.get(url + "/healthz", verify=tls, timeout=2).raise_for_status()
            return
        except (httpx2.TransportError, httpx2.HTTPStatusError):
            assert time.monotonic() < deadline, "caddy did not serve TLS in time"
            time.sleep(0.2)


class TlsFlow(Flow):
    """The SDK's OAuth client, through a client that trusts only Caddy's authority."""

    def __init__(self, server: Proxied, browser: Browser) -> None:
        super().__init__(server, browser)  # type: ignore[arg-type]
        self.tls = server.tls

    @asynccontextmanager
    async def client(self, server: Proxied) -> AsyncIterator[Client]:  # type: ignore[override]
        async with (
            httpx2.AsyncClient(auth=self.provider, timeout=30, verify=self.tls) as http,
            Client(streamable_http_client(server.mcp_url, http_client=http)) as client,
        ):
            yield client


async def test_discovery_names_the_public_https_urls_through_the_proxy(proxied: Proxied) -> None:
    async with httpx2.AsyncClient(verify=proxied.tls, timeout=30) as http:
        challenge = await http.post(proxied.public_url + "/mcp", json={})
        assert challenge.status_code == 401
        header = challenge.headers["www-authenticate"]
        metadata_url = proxied.public_url + "/.well-known/oauth-protected-resource/mcp"
        assert f'resource_metadata="{metadata_url}"' in header
        resource = (await http.get(metadata_url)).json()
        assert resource["resource"] == proxied.public_url + "/mcp"
        issuer = resource["authorization_servers"][0].rstrip("/")
        assert issuer == proxied.public_url
        server = (await http.get(issuer + "/.well-known/oauth-authorization-server")).json()
    for endpoint in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
        assert server[endpoint].startswith(proxied.public_url + "/")


async def test_sign_in_and_a_tool_call_over_tls(proxied: Proxied) -> None:
    browser = Browser(proxied.key, http=httpx2.AsyncClient(timeout=30, verify=proxied.tls))
    flow = TlsFlow(proxied, browser)
    try:
        async with flow.client(proxied) as client:
            stored = ok(await client.call_tool("store_memory", {"content": "stored over TLS"}))
    finally:
        await browser.aclose()
    assert stored is not None
    async with httpx2.AsyncClient(verify=proxied.tls, timeout=30) as http:
        found = await http.post(
            proxied.public_url + "/v1/memory/search",
            json={"query": "stored over TLS"},
            headers={"Authorization": f"Bearer {proxied.key}"},
        )
    assert [row["content"] for row in found.json()["memories"]] == ["stored over TLS"]
    assert flow.callbacks[0]["iss"] == proxied.public_url
    assert all(url.startswith(proxied.public_url + "/") for url in flow.authorize_urls)


# --- the README's recipe for one machine, as written ---------------------------------------

README = Path(__file__).resolve().parents[1] / "README.md"


def _readme_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    return [block.split("\n", 1)[1] for block in text.split("```")[1::2]]


def _laptop_recipe() -> tuple[str, list[str]]:
    """The README's local Caddyfile and its server command (split as a shell would)."""
    caddyfile = next(b for b in _readme_blocks() if "tls internal" in b)
    command = next(
        line
        for block in _readme_blocks()
        for line in block.splitlines()
        if line.startswith("MEMORYROUTER_PUBLIC_URL=https://localhost")
    )
    return caddyfile, shlex.split(command)


def test_the_readmes_recipe_for_one_machine_runs_as_written(tmp_path: Path) -> None:
    if not Path(CADDY).exists():
        pytest.fail("MEMORYROUTER_TEST_CADDY=1 but Caddy is not installed")
    caddyfile, command = _laptop_recipe()
    settings = [word for word in command if "=" in word]
    assignments = dict(word.split("=", 1) for word in settings)
    program = [word for word in command if word not in settings]
    assert program == ["mcp-memoryrouter", "serve"]
    public_url = assignments["MEMORYROUTER_PUBLIC_URL"]
    # a person's home: Caddy's data and the server's vault land where the README says
    home = tmp_path / "home"
    site = home / "site"
    site.mkdir(parents=True)
    (site / "Caddyfile").write_text(caddyfile)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MEMORYROUTER_"))}
    env |= {"HOME": str(home), "MEMORYROUTER_EMBEDDINGS": "none"}  # no model to build here
    log = tmp_path / "recipe.log"
    with log.open("wb") as out:
        caddy = subprocess.Popen(
            [CADDY, "run"], cwd=site, env=env, stdout=out, stderr=subprocess.STDOUT
        )
        server = subprocess.Popen(
            [sys.executable, "-m", "mcp_memoryrouter", *program[1:]],
            env=env | assignments,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            root = home / ".local/share/caddy/pki/authorities/local/root.crt"
            tls = _wait_for_authority(root, caddy, log)
            _wait_for_tls(public_url, tls)
            key = (home / ".local/share/mcp-memoryrouter/first-run.key").read_text().strip()
            headers = {"X-Memory-Key": key}
            body = {"messages": [{"role": "user", "content": "the kettle whistles over TLS"}]}
            with httpx2.Client(verify=tls, timeout=30) as http:
                stored = http.post(public_url + "/v1/memory/ingest", json=body, headers=headers)
                assert stored.status_code == 202, stored.text
                found = http.post(
                    public_url + "/v1/memory/search", json={"query": "kettle"}, headers=headers
                )
                metadata = http.get(public_url + "/.well-known/oauth-protected-resource/mcp")
        finally:
            server.terminate()
            caddy.terminate()
            server.wait(timeout=START_SECONDS)
            caddy.wait(timeout=START_SECONDS)
    assert [m["content"] for m in found.json()["memories"]] == ["the kettle whistles over TLS"]
    assert metadata.json()["resource"] == public_url + "/mcp"
