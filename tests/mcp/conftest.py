"""The MCP server, embedded (vault and endpoint in one process) or as a proxy in front of a
vault process of its own. Each module shares one of each, and each test gets a vault of its own
on it (a new key): starting the vault process costs seconds, a vault costs a row. A test that
reads the whole store rather than its vault is marked ``own_server`` and gets a server of its
own."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.mcp import McpServer, embedded_at, proxy_at


@pytest.fixture(scope="module")
def shared_embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    with embedded_at(tmp_path_factory.mktemp("embedded")) as server:
        yield server


@pytest.fixture(scope="module")
def shared_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    with proxy_at(tmp_path_factory.mktemp("proxy")) as server:
        yield server


def _own_vault(request: pytest.FixtureRequest, shared: str, tmp_path: Path) -> Iterator[McpServer]:
    if request.node.get_closest_marker("own_server"):
        start = embedded_at if shared == "shared_embedded" else proxy_at
        with start(tmp_path) as alone:
            yield alone
        return
    server: McpServer = request.getfixturevalue(shared)
    yield replace(server, key=server.new_key())


@pytest.fixture
def embedded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[McpServer]:
    """The embedded server, with a vault of the test's own."""
    yield from _own_vault(request, "shared_embedded", tmp_path)


@pytest.fixture
def proxy(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[McpServer]:
    """The MCP server in front of a ``serve`` process, with a vault of the test's own."""
    yield from _own_vault(request, "shared_proxy", tmp_path)


@pytest.fixture(params=["embedded", "proxy"])
def mcp_server(request: pytest.FixtureRequest) -> McpServer:
    server: McpServer = request.getfixturevalue(request.param)
    return server
