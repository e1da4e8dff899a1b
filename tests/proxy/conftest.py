"""A real server with the chat proxy on loopback, in front of a provider double. Each module
shares one of each; each test gets a vault of its own on the server (a new key), the double's
record emptied and every rate limit full again: building the server costs half a second, a
vault costs a row."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.edge.ratelimit import TokenBuckets
from tests.proxy.upstream import Upstream
from tests.support import live_server, rate_limits
from tests.support.proxy import Proxied, settings_for


@pytest.fixture(scope="module")
def shared_upstream() -> Iterator[tuple[Upstream, str]]:
    double = Upstream()
    with live_server(double) as url:
        yield double, url


@pytest.fixture
def upstream(shared_upstream: tuple[Upstream, str]) -> Iterator[tuple[Upstream, str]]:
    """The module's provider double, its record empty."""
    double, _ = shared_upstream
    double.received.clear()
    yield shared_upstream
    double.received.clear()


@pytest.fixture(scope="module")
def shared_proxied(
    tmp_path_factory: pytest.TempPathFactory, shared_upstream: tuple[Upstream, str]
) -> Iterator[tuple[Proxied, list[TokenBuckets]]]:
    double, upstream_url = shared_upstream
    server = create_server(settings_for(tmp_path_factory.mktemp("proxied"), upstream_url))
    assert server.service is not None
    with live_server(server.app, lifespan="on") as url:
        yield Proxied(url, "", server.service, double, upstream_url), rate_limits(server.app)


@pytest.fixture
def proxied(
    shared_proxied: tuple[Proxied, list[TokenBuckets]], upstream: tuple[Upstream, str]
) -> Iterator[Proxied]:
    """The module's server, with a vault of the test's own."""
    shared, limits = shared_proxied
    key, _ = shared.service.create_vault()
    yield replace(shared, key=key)
    for buckets in limits:
        buckets._buckets.clear()
