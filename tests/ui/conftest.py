"""The explorer over a real server on loopback, driven by a real browser (Debian's chromium,
through Playwright), with a vault holding all three tiers; axe-core (from npm) checks each
page in the same browser. Skipped only where /usr/bin/chromium or axe-core is absent;
`.ci/run` installs both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext

from tests.support.oauth import OAuthServer
from tests.support.ui import (
    DESKTOP,
    Seeded,
    seed,
)


@pytest.fixture
def server(oauth_server: OAuthServer) -> OAuthServer:
    """The explorer's tests call the authorization server ``server``."""
    return oauth_server


@pytest.fixture
def seeded(server: OAuthServer) -> Seeded:
    return seed(server, server.key)


@pytest.fixture
def context(chromium: Browser) -> Iterator[BrowserContext]:
    # Nothing may load from outside the server: every other request is recorded and refused.
    made = chromium.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    try:
        yield made
    finally:
        made.close()
