"""A real server with the chat proxy on loopback, in front of a provider double."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_memoryrouter.app import create_server
from tests.proxy.upstream import Upstream
from tests.support import live_server
from tests.support.proxy import Proxied, settings_for


@pytest.fixture
def upstream() -> Iterator[tuple[Upstream, str]]:
    double = Upstream()
    with live_server(double) as url:
        yield double, url


@pytest.fixture
def proxied(tmp_path: Path, upstream: tuple[Upstream, str]) -> Iterator[Proxied]:
    double, upstream_url = upstream
    server = create_server(settings_for(tmp_path, upstream_url))
    assert server.service is not None
    key, _ = server.service.create_vault()
    with live_server(server.app, lifespan="on") as url:
        yield Proxied(url, key, server.service, double, upstream_url)
