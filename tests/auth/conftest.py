"""A fresh authorization server per test (see ``tests/support/oauth.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.oauth import OAuthServer, oauth_server_at


@pytest.fixture
def oauth_server(tmp_path: Path) -> Iterator[OAuthServer]:
    with oauth_server_at(tmp_path) as server:
        yield server
