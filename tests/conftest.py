from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpcore2
import pytest
from playwright.sync_api import Browser, sync_playwright

from mcp_memoryrouter.edge.ratelimit import TokenBuckets
from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.store.postgres import PostgresStore
from tests import pg
from tests.support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    AnyStore,
    StoreFactory,
    Vault,
    loopback,
    make_vault,
    markers,
    rate_limits,
    sqlite_store,
)
from tests.support.oauth import OAuthServer, oauth_server_at

# One default TLS context for every HTTP client a test makes (httpx2 builds a new one per
# client, reading the system's CA bundle: 20 to 50 ms each, and the tests make thousands of
# clients, nearly all to loopback). The same settings, built once; nothing here changes one.
httpcore2.default_ssl_context = functools.cache(httpcore2.default_ssl_context)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """browser, subprocess, postgres and slow, from what each test uses (support/markers.py)."""
    markers.apply(items)


@pytest.fixture
def store_backend() -> str:
    """Which store ``vault`` and ``new_store`` open; tests/vault runs every test on both."""
    return "sqlite"


@pytest.fixture(scope="session")
def postgres_databases() -> Iterator[pg.Databases]:
    """One PostgreSQL server per session (see ``tests/pg.py``)."""
    if not pg.available():
        pytest.skip("no PostgreSQL for the store tests (MEMORYROUTER_TEST_POSTGRES)")
    try:
        with pg.server() as url:
            databases = pg.Databases(url)
            yield databases
            databases.close()
    except Exception as exc:  # starting a server can fail in many ways; say which
        if pg.wanted():
            raise
        pytest.skip(f"PostgreSQL unavailable: {type(exc).__name__}")


@pytest.fixture
def new_store(store_backend: str, request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
    """A factory of fresh, empty stores of the test's backend."""
    if store_backend == "sqlite":
        yield sqlite_store
        return
    databases: pg.Databases = request.getfixturevalue("postgres_databases")
    urls: list[str] = []

    def postgres_store(tmp_path: Path) -> AnyStore:
        urls.append(databases.create())
        return PostgresStore(urls[-1], pool_min=0, pool_max=4)

    yield postgres_store
    for url in urls:
        databases.release(url)


@pytest.fixture
def vault_embedders() -> Embedders | None:
    """The embedding models ``vault`` offers (none unless a module says otherwise)."""
    return None


@pytest.fixture
def vault(
    tmp_path: Path, new_store: StoreFactory, vault_embedders: Embedders | None
) -> Iterator[Vault]:
    v = make_vault(tmp_path, store=new_store, embedders=vault_embedders)
    yield v
    v.http.close()
    v.store.close()


# One Chromium per module: Playwright's event loop runs while it is open, and the tests of
# other modules run their own.
@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """Debian's chromium, driven by Playwright; skipped where it is absent."""
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's /usr/bin/chromium (.ci/run installs it)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def shared_oauth_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[OAuthServer, list[TokenBuckets]]]:
    """The module's server and its rate limits (put back to full after each test)."""
    with oauth_server_at(tmp_path_factory.mktemp("oauth")) as server:
        yield server, rate_limits(server.server.app)


@pytest.fixture
def oauth_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OAuthServer]:
    """The whole server with its authorization server on loopback, with a vault of the
    test's own: one server per module (building one costs half a second), a new key per test,
    and the clock and every rate limit put back after it. A test that needs the server's whole
    state to itself (its data directory, every row of its tables) is marked ``own_server``."""
    if request.node.get_closest_marker("own_server"):
        with oauth_server_at(tmp_path) as alone:
            yield alone
        return
    shared, limits = request.getfixturevalue("shared_oauth_server")
    try:
        yield replace(shared, key=shared.new_key())
    finally:
        shared.clock.offset = 0.0
        for buckets in limits:
            buckets._buckets.clear()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_sessionfinish() -> None:
    loopback.close_all()
