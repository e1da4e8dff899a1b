"""The server's reflector under test: a real server (``create_server``) on loopback whose
reflector calls a provider double over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reflector.provider import Provider
from tests.support import live_server


@pytest.fixture
def provider() -> Iterator[tuple[Provider, str]]:
    double = Provider()
    with live_server(double) as url:
        yield double, url
