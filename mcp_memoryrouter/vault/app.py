"""Composition root of the vault: settings → store → service → FastAPI app."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio.to_thread
from fastapi import FastAPI
from starlette.routing import Match
from starlette.types import Scope
from threadpoolctl import threadpool_limits

from mcp_memoryrouter import __version__
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.private import new_private_dir, private_dir
from mcp_memoryrouter.vault.http.api import router
from mcp_memoryrouter.vault.http.boundary import BodyLimit, install_error_handlers
from mcp_memoryrouter.vault.http.inprocess import InProcess
from mcp_memoryrouter.vault.http.openapi import with_server_rules
from mcp_memoryrouter.vault.http.presented import presented_key
from mcp_memoryrouter.vault.http.ratelimit import (
    MonotonicMs,
    RateLimit,
    SharedBuckets,
    TokenBuckets,
)
from mcp_memoryrouter.vault.indexer import EmbeddingWorker
from mcp_memoryrouter.vault.rules.access import Access
from mcp_memoryrouter.vault.search.embeddings import (
    Embedder,
    Embedders,
    LocalMiniLM,
    OpenAICompatible,
)
from mcp_memoryrouter.vault.service import Clock, VaultService
from mcp_memoryrouter.vault.store import Store
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore


def system_clock() -> int:
    return time.time_ns() // 1_000_000


def monotonic_clock() -> int:
    return time.monotonic_ns() // 1_000_000


def open_store(settings: Settings, *, serving: bool = False) -> tuple[Store, str]:
    """The store the settings name, and its kind for /healthz. A ``serving`` SQLite store
    claims its file against other serving processes (``StoreInUse``)."""
    url = settings.database_url
    if url and url.startswith(("postgresql://", "postgres://")):
        # Imported here: psycopg is the optional ``postgres`` extra, SQLite needs nothing.
        from mcp_memoryrouter.vault.store.postgres import PostgresStore

        store = PostgresStore(url, pool_min=settings.db_pool_min, pool_max=settings.db_pool_max)
        return store, "postgresql"
    if url and not url.startswith("sqlite:///"):
        raise ValueError(f"unsupported MEMORYROUTER_DATABASE_URL scheme: {url.split(':', 1)[0]}")
    path = Path(settings.sqlite_path)
    private_dir(settings.data_dir)
    new_private_dir(path.parent)  # a database placed outside the data directory
    return SQLiteStore(path, serving=serving), "sqlite"


def migrate_store(settings: Settings) -> tuple[str, int]:
    """Create or upgrade the configured store's schema (idempotent): (kind, version)."""
    store, kind = open_store(settings)  # both stores migrate when they open
    try:
        return kind, int(getattr(store, "schema_version", 0))
    finally:
        store.close()


def embedders_for(settings: Settings) -> Embedders:
    factories: dict[str, Callable[[], Embedder]] = {
        "local": lambda: LocalMiniLM(
            threads=settings.embed_threads, cache_dir=settings.cache_dir / "models"
        )
    }
    if settings.openai_base_url:
        base_url = settings.openai_base_url
        factories["openai"] = lambda: OpenAICompatible(
            base_url, settings.openai_model, settings.openai_api_key, settings.openai_dim
        )
    return Embedders(factories, settings.embeddings)


def build_service(
    settings: Settings, *, clock: Clock | None = None, start_worker: bool = True
) -> tuple[VaultService, str]:
    """The service over the configured store, with its embedding worker running (a serving
    process: it claims a SQLite vault)."""
    # A query's vector scan is one small matrix product; OpenBLAS's own threads only spin
    # between queries, doubling a search's CPU for the same wall time (docs/benchmarks.md,
    # "The cost of a call"). Concurrent requests are what run in parallel.
    threadpool_limits(limits=1, user_api="blas")
    store, kind = open_store(settings, serving=start_worker)
    embedders = embedders_for(settings)
    worker = EmbeddingWorker(store, embedders)
    service = VaultService(
        store,
        clock=clock or system_clock,
        lease_seconds=settings.lease_seconds,
        embedders=embedders,
        worker=worker,
    )
    if start_worker:
        default = embedders.get(embedders.resolve(None))
        if isinstance(default, LocalMiniLM):
            default.prepare()  # the first start builds the model here, never in a request
        worker.start()
    return service, kind


def admission(service: VaultService) -> Callable[[Scope], Awaitable[Access]]:
    """The key check a request with a body passes before the body is read (``BodyLimit``):
    the presented key, read by the one rule authentication and the rate limit share."""

    async def admit(scope: Scope) -> Access:
        key = presented_key(scope.get("headers", []))
        return await anyio.to_thread.run_sync(service.authenticate, key)

    return admit


def served_by(app: FastAPI) -> Callable[[Scope], bool]:
    """Whether one of ``app``'s routes answers a request's method and path."""

    def serves(scope: Scope) -> bool:
        return any(route.matches(scope)[0] is Match.FULL for route in app.router.routes)

    return serves


def in_process(app: FastAPI) -> InProcess:
    """The carrier that calls ``app``'s routes without HTTP (for the embedded MCP server)."""
    return InProcess(app)


def create_vault_app(
    settings: Settings,
    *,
    service: VaultService | None = None,
    store_kind: str = "sqlite",
    clock: Clock | None = None,
    rate_clock: MonotonicMs = monotonic_clock,
) -> FastAPI:
    """``rate_clock`` (milliseconds, monotonic) is what the rate limit refills by."""
    if service is None:
        service, store_kind = build_service(settings, clock=clock)
    app = FastAPI(
        title="MemoryRouter vault",
        version=__version__,
        description="Three-tier memory: raw moments, reflections, high-level reflections.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.service = service
    app.state.store_kind = store_kind
    app.state.max_body_bytes = settings.max_body_bytes
    app.state.rate_buckets = None
    install_error_handlers(app)
    # the embedding models this server has; "" (or no choice) is its default
    app.openapi = with_server_rules(app.openapi, service.embedders.names)  # type: ignore[method-assign]
    app.include_router(router)
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.max_body_bytes,
        admit=admission(service),
        seconds=settings.body_timeout_seconds,
        serves=served_by(app),
    )
    if settings.rate_limit_per_minute:
        per_minute = settings.rate_limit_per_minute
        burst = settings.rate_limit_burst or per_minute
        # added last, so outermost: a throttled request is refused before its body is read
        app.state.rate_buckets = (
            SharedBuckets(service.take_token, per_minute, burst)
            if service.shares_rate_limits
            else TokenBuckets(per_minute, burst, rate_clock)
        )
        app.add_middleware(RateLimit, buckets=app.state.rate_buckets)
    return app
