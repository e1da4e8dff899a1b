"""Test seams: an injectable clock, an in-process vault, a real uvicorn on loopback."""

from __future__ import annotations

import functools
import socket
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import psycopg
from anyio.from_thread import BlockingPortal
from fastapi import FastAPI
from starlette.testclient import TestClient

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.edge.ratelimit import TokenBuckets
from mcp_memoryrouter.vault.app import create_vault_app
from mcp_memoryrouter.vault.indexer import EmbeddingWorker
from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.postgres import PostgresStore
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support.loopback import live_server as live_server

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00.000Z

AnyStore = SQLiteStore | PostgresStore
StoreFactory = Callable[[Path], AnyStore]  # the test's tmp_path -> a fresh, empty store


def sqlite_store(tmp_path: Path) -> AnyStore:
    """A fresh store: a copy of a new store's file, so that each test does not run the
    migrations again (their writes and the syncs of a new WAL database, 30 ms a store)."""
    path = tmp_path / "vault.sqlite3"
    path.write_bytes(_migrated_store())
    return SQLiteStore(path)


@functools.cache
def _migrated_store() -> bytes:
    """The file of a new SQLite store, migrated and closed (its WAL folded in), once per
    test process."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "vault.sqlite3"
        SQLiteStore(path).close()
        return path.read_bytes()


@functools.cache
def event_loop() -> BlockingPortal:
    """One event loop for the process's in-process test clients, on a thread of its own (a
    daemon: it ends with the process). A TestClient not opened as a context starts a thread
    and a loop for each request, 3 to 8 ms; an app on one loop is also what a server runs."""
    ready: Future[BlockingPortal] = Future()

    async def run() -> None:
        async with BlockingPortal() as portal:
            ready.set_result(portal)
            await portal.sleep_until_stopped()

    threading.Thread(target=anyio.run, args=(run,), name="test-clients", daemon=True).start()
    return ready.result(timeout=10)


@functools.cache
def _defaults() -> Settings:
    """The settings with nothing set (reading them is 5 ms; tests make thousands)."""
    return Settings()


def free_port() -> int:
    """A loopback port nothing listens on right now, for a server process to bind."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Clock:
    """Real time (seconds) plus an offset a test can move forward: a server's clock
    (``create_server(settings, clock=...)``)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


class FakeClock:
    def __init__(self, start_ms: int = T0) -> None:
        self.now_ms = start_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, seconds: float) -> None:
        self.now_ms += int(seconds * 1000)


@dataclass
class Vault:
    app: FastAPI
    service: VaultService
    store: AnyStore
    clock: FakeClock
    http: TestClient
    key: str
    worker: EmbeddingWorker

    def headers(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.key}"}

    def post(self, path: str, body: Any, key: str | None = None) -> Any:
        return self.http.post(path, json=body, headers=self.headers(key))

    @property
    def kind(self) -> str:
        """The store kind /healthz reports."""
        return "sqlite" if isinstance(self.store, SQLiteStore) else "postgresql"

    def sql(self, statement: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        """Read the store's tables directly (``?`` placeholders on either backend)."""
        if isinstance(self.store, SQLiteStore):
            conn = sqlite3.connect(self.store._path)
            try:
                return conn.execute(statement, params).fetchall()
            finally:
                conn.close()
        with psycopg.connect(self.store.url) as pg:
            return pg.execute(statement.replace("?", "%s").encode(), params).fetchall()

    def dump(self) -> str:
        """Every row of every table as text, less when each key was last used: that moves
        when a key is presented (at most once a minute), whatever the request does."""
        if isinstance(self.store, SQLiteStore):
            source = sqlite3.connect(self.store._path)
            copy = sqlite3.connect(":memory:")
            try:
                source.backup(copy)
                copy.execute("UPDATE keys SET last_used_ms = NULL")
                return "\n".join(copy.iterdump())
            finally:
                source.close()
                copy.close()
        tables = self.sql("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return "\n".join(
            str(row)
            for (table,) in tables
            for row in self.sql(f"SELECT to_jsonb(t) - 'last_used_ms' FROM \"{table}\" t")
        )

    def lexical_rows(self) -> int:
        """Entries left in the lexical index (FTS5 table; tsvectors on PostgreSQL)."""
        if isinstance(self.store, SQLiteStore):
            return int(self.sql("SELECT count(*) FROM memories_fts")[0][0])
        return int(self.sql("SELECT count(*) FROM memories WHERE tsv <> ''::tsvector")[0][0])

    def reopen(self) -> AnyStore:
        """A second store over the same database, as a restarted process would open."""
        if isinstance(self.store, SQLiteStore):
            return SQLiteStore(self.store._path)
        return PostgresStore(self.store.url, pool_min=0, pool_max=2)

    def new_key(self, read_only: bool = False) -> str:
        key, _ = self.service.create_vault(read_only=read_only)
        return key

    def ingest(
        self, *texts: str, date: str = "2026-02-01T10:00:00Z", key: str | None = None, **extra: Any
    ) -> Any:
        body = {"messages": [{"role": "user", "content": t, "date": date} for t in texts], **extra}
        response = self.post("/v1/memory/ingest", body, key)
        assert response.status_code == 202, response.text
        return response.json()


def make_vault(
    tmp_path: Path,
    *,
    lease_seconds: int = 900,
    max_body_bytes: int = 1_048_576,
    embedders: Embedders | None = None,
    store: StoreFactory = sqlite_store,
) -> Vault:
    """An in-process vault on a real store (a SQLite file unless ``store`` makes another);
    its embedding worker runs only when a test calls ``vault.worker.drain()``."""
    settings = _defaults().model_copy(
        update={
            "data_dir": tmp_path,
            "lease_seconds": lease_seconds,
            "max_body_bytes": max_body_bytes,
        }
    )
    clock = FakeClock()
    opened = store(tmp_path)
    embedders = embedders or Embedders({}, "none")
    worker = EmbeddingWorker(opened, embedders)  # the test's own: not woken by writes
    service = VaultService(
        opened,
        clock=clock,
        lease_seconds=lease_seconds,
        embedders=embedders,
    )
    kind = "sqlite" if isinstance(opened, SQLiteStore) else "postgresql"
    app = create_vault_app(settings, service=service, store_kind=kind)
    key, _ = service.create_vault()
    http = TestClient(app, raise_server_exceptions=False)
    http.portal = event_loop()
    return Vault(app, service, opened, clock, http, key, worker)


def rate_limits(app: object) -> list[TokenBuckets]:
    """Every rate limit held in memory by ``app`` and what it wraps (the authorization
    server's, the explorer's sign-ins, the REST API's), found by walking its attributes."""
    found: list[TokenBuckets] = []
    seen: set[int] = set()
    todo: list[object] = [app]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, TokenBuckets):
            found.append(item)
        elif isinstance(item, (list, tuple, set, frozenset)):
            todo += list(item)
        elif isinstance(item, dict):
            todo += list(item.values())
        elif type(item).__module__.split(".")[0] in ("mcp_memoryrouter", "starlette", "fastapi"):
            todo += list(getattr(item, "__dict__", {}).values())
            todo += [getattr(item, slot, None) for slot in getattr(type(item), "__slots__", ())]
        elif callable(item) and hasattr(item, "__closure__"):  # a function wrapping an app
            todo += [cell.cell_contents for cell in item.__closure__ or ()]
    return found


# Debian's chromium, driven by Playwright (which never downloads a browser of its own here)
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
