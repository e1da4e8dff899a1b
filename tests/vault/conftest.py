from __future__ import annotations

import pytest

from tests import pg


# Every store contract test runs on SQLite, and on PostgreSQL when a server can be had
# (required in CI: MEMORYROUTER_TEST_POSTGRES=1).
@pytest.fixture(params=pg.BACKENDS if pg.available() else ["sqlite"])
def store_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend
