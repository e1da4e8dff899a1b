"""Composition root of the vault: settings → store → service → FastAPI app."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI
from starlette.routing import Match
from starlette.types import Scope
from threadpoolctl import threadpool_limits

from mcp_memoryrouter import __version__
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.private import new_private_dir, writable_data_dir
from mcp_memoryrouter.vault.http.api import VaultApp, router
from mcp_memoryrouter.vault.http.boundary import Admission, install_error_handlers
from mcp_memoryrouter.vault.http.front import VaultAPI
from mcp_memoryrouter.vault.http.inprocess import InProcess
from mcp_memoryrouter.vault.http.openapi import with_server_rules
from mcp_memoryrouter.vault.http.ratelimit import (
    MonotonicMs,
    RateBuckets,
    SharedBuckets,
    TokenBuckets,
)
from mcp_memoryrouter.vault.indexer import EmbeddingWorker
from mcp_memoryrouter.vault.search import learned
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
    writable_data_dir(settings.data_dir)
    new_private_dir(path.parent)  # a database placed outside the data directory
    return SQLiteStore(path, serving=serving), "sqlite"


def migrate_store(settings: Settings) -> tuple[str, int]:
    """Create or upgrade the configured store's schema (idempotent): (kind, version)."""
    store, kind = open_store(settings)  # both stores migrate when they open
    try:
        return kind, int(getattr(store, "schema_version", 0))
    finally:
        store.close()


def ranking(settings: Settings) -> str:
    """How search ranks, for the start line: the package's learned ranker, or fusion."""
    if settings.ranker == "fusion":
        return "fusion (BM25 and vectors, weighted; MEMORYROUTER_RANKER=fusion)"
    return learned.describe(learned.load())


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
        learned_ranker=settings.ranker == "learned",
    )
    if start_worker:
        default = embedders.get(embedders.resolve(None))
        if isinstance(default, LocalMiniLM):
            default.prepare()  # the first start builds the model here, never in a request
        worker.start()
    return service, kind


def served_by(app: FastAPI) -> Callable[[Scope], bool]:
    """Whether one of ``app``'s routes answers a request's method and path."""

    def serves(scope: Scope) -> bool:
        return any(route.matches(scope)[0] is Match.FULL for route in app.router.routes)

    return serves


def front_of(app: FastAPI) -> VaultAPI:
    """The front of a vault app ``create_vault_app`` made."""
    if not isinstance(app, VaultApp):
        raise TypeError("not a vault app: make it with create_vault_app")
    return app.front


def in_process(app: FastAPI) -> InProcess:
    """The carrier that calls ``app``'s front without HTTP (for the embedded surfaces)."""
    return InProcess(front_of(app))


def create_vault_app(
    settings: Settings,
    *,
    service: VaultService | None = None,
    store_kind: str = "sqlite",
    clock: Clock | None = None,
    rate_clock: MonotonicMs = monotonic_clock,
) -> VaultApp:
    """``rate_clock`` (milliseconds, monotonic) is what the rate limit refills by."""
    if service is None:
        service, store_kind = build_service(settings, clock=clock)
    front = VaultAPI(
        service,
        store_kind=store_kind,
        max_body_bytes=settings.max_body_bytes,
        budgets=rate_budgets(settings, service, rate_clock),
    )
    app = VaultApp(
        front,
        title="MemoryRouter vault",
        version=__version__,
        description="Three-tier memory: raw moments, reflections, high-level reflections.",
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    # the embedding models this server has; "" (or no choice) is its default
    app.openapi = with_server_rules(app.openapi, service.embedders.names)  # type: ignore[method-assign]
    # the routes themselves, built once a process: FastAPI builds an included router's
    # routes again for each app that includes it (0.1 to 0.3 s an app, at its first request)
    app.router.routes.extend(router.routes)
    # every request is admitted (rate limit, size, key) before its body is read
    app.add_middleware(
        Admission, front=front, serves=served_by(app), seconds=settings.body_timeout_seconds
    )
    return app


def rate_budgets(
    settings: Settings, service: VaultService, rate_clock: MonotonicMs
) -> RateBuckets | None:
    """The rate limit's buckets: in the store when replicas share it (PostgreSQL), else in
    this process; None when the limit is off."""
    per_minute = settings.rate_limit_per_minute
    if not per_minute:
        return None
    burst = settings.rate_limit_burst or per_minute
    if service.shares_rate_limits:
        return SharedBuckets(service.take_token, per_minute, burst)
    return TokenBuckets(per_minute, burst, rate_clock)
