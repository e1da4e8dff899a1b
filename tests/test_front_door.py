"""What a person finds at the server's address and in what ``serve`` prints: a browser
opening the address lands in the explorer; the banner names the explorer, says how the
person signs in to a connector, and with a public HTTPS URL gives the URL to paste."""

from __future__ import annotations

from pathlib import Path

import httpx2

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.startup import Listening, banner
from tests.support import live_server

STDIO = ("/venv/bin/mcp-memoryrouter", "stdio")


def test_the_servers_address_sends_a_browser_to_the_explorer(tmp_path: Path) -> None:
    server = create_server(Settings(data_dir=tmp_path, embeddings="none"))
    with live_server(server.app, lifespan="on") as url:
        answer = httpx2.get(url + "/", follow_redirects=False)
        assert answer.status_code == 302
        assert answer.headers["location"] == "/ui"
        landed = httpx2.get(url + "/", follow_redirects=True)
        assert landed.status_code == 200
        assert landed.url.path.startswith("/ui")


def test_without_the_explorer_the_address_is_not_found(tmp_path: Path) -> None:
    server = create_server(Settings(data_dir=tmp_path, embeddings="none", ui="off"))
    with live_server(server.app, lifespan="on") as url:
        assert httpx2.get(url + "/", follow_redirects=False).status_code == 404


def test_the_banner_names_the_explorer() -> None:
    text = banner(Listening("http://127.0.0.1:8787", None, STDIO), None, "1")
    assert "http://127.0.0.1:8787/ui" in text
    hidden = banner(Listening("http://127.0.0.1:8787", None, STDIO, explorer=False), None, "1")
    assert "/ui" not in hidden


def test_no_key_to_paste_only_when_people_sign_in_with_an_identity_provider() -> None:
    keyed = banner(Listening("http://127.0.0.1:8787", None, STDIO), None, "1")
    assert "no key to paste" not in keyed
    assert "memory key" in keyed
    oidc = banner(Listening("http://127.0.0.1:8787", None, STDIO, signin="oidc"), None, "1")
    assert "no key to paste" in oidc


def test_a_public_https_url_prints_the_connector_url_to_paste() -> None:
    public = banner(Listening("https://memory.example.com", None, STDIO), None, "1")
    lines = public.splitlines()
    at = next(i for i, line in enumerate(lines) if "custom connector" in line)
    assert lines[at + 1].strip() == "https://memory.example.com/mcp"
    local = banner(Listening("http://127.0.0.1:8787", None, STDIO), None, "1")
    assert "custom connector" not in local
