"""Acceptance: stateless replicas over one database. Real server processes on loopback, 16
parallel consolidation workers spread over them, and a server killed with SIGKILL in the
middle of commits."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest

from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.postgres import PostgresStore
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests import pg
from tests.support import AnyStore, FakeClock, free_port

RAW = 20_000
WORKERS = 16
# About a minute each on a shared two-core machine: CI runs them (MEMORYROUTER_TEST_ACCEPTANCE=1).
pytestmark = pytest.mark.skipif(
    os.environ.get("MEMORYROUTER_TEST_ACCEPTANCE") != "1",
    reason="acceptance runs: set MEMORYROUTER_TEST_ACCEPTANCE=1",
)
ROOT = Path(__file__).resolve().parents[2]
START = datetime(2026, 1, 1, tzinfo=UTC)
# Per batch: committed?, sources, reflections, lineage rows of its reflections.
BATCHES = (
    "SELECT b.id, b.committed_ms IS NOT NULL, "
    "(SELECT count(*) FROM batch_sources s WHERE s.batch_id = b.id), "
    "(SELECT count(*) FROM memories r WHERE r.batch_id = b.id), "
    "(SELECT count(*) FROM lineage l JOIN memories r ON r.id = l.parent_id "
    " WHERE r.batch_id = b.id) FROM batches b"
)


@contextmanager
def server_process(database_url: str, tmp_path: Path, lease_seconds: int) -> Iterator[Any]:
    """A vault server in its own process; yields (base URL, process)."""
    port = free_port()
    env = {
        **os.environ,
        "MEMORYROUTER_DATABASE_URL": database_url,
        "MEMORYROUTER_DATA_DIR": str(tmp_path),
        "MEMORYROUTER_EMBEDDINGS": "none",
        "MEMORYROUTER_LEASE_SECONDS": str(lease_seconds),
        "MEMORYROUTER_DB_POOL_MAX": "8",
        "MEMORYROUTER_RATE_LIMIT_PER_MINUTE": "0",  # one key drives every worker here
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "tests.store.served_vault:app",
            "--factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx2.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("the server process did not start within 30 s")
            time.sleep(0.1)
        yield url, process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)


@dataclass
class Tally:
    statuses: Counter[int] = field(default_factory=Counter)
    consolidated: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, response: httpx2.Response) -> None:
        with self.lock:
            self.statuses[response.status_code] += 1

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)


def ingest(url: str, key: str, count: int) -> None:
    with httpx2.Client(base_url=url, headers={"X-Memory-Key": key}, timeout=60) as http:
        for start in range(0, count, 500):
            messages = [
                {
                    "role": "user",
                    "content": f"Moment {i}: reviewed feature {i % 17}, fixed bug {i * 7 % 101}.",
                    "date": (START + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
                for i in range(start, min(count, start + 500))
            ]
            response = http.post("/v1/memory/ingest", json={"messages": messages})
            assert response.status_code == 202, response.text


def work(urls: list[str], key: str, tally: Tally, stop_at: float, survive: bool) -> None:
    """One consolidation worker: check out, commit, repeat until the vault has no debt.
    It keeps no state between batches; with ``survive`` it rides through a dead server."""
    clients = [httpx2.Client(base_url=u, headers={"X-Memory-Key": key}, timeout=30) for u in urls]
    turn = 0
    try:
        while time.monotonic() < stop_at:
            http = clients[turn % len(clients)]
            turn += 1
            try:
                batch = http.post(
                    "/v1/memory/consolidate/checkout", json={"tier": 1, "max_tokens": 1000}
                )
                tally.saw(batch)
                if batch.status_code != 200:
                    continue
                body = batch.json()
                if body["batch_id"] is None:
                    stats = http.get("/v1/memory/stats")
                    if stats.json()["reflection"]["unconsolidated"]["raw"]["units"] == 0:
                        return
                    time.sleep(0.2)  # rows leased by others (or by a dead server's batch)
                    continue
                entries = [{"text": f"{len(body['source_ids'])} moments of work.", "importance": 5}]
                done = http.post(
                    "/v1/memory/consolidate/commit",
                    json={"batch_id": body["batch_id"], "entries": entries},
                )
                tally.saw(done)
                if done.status_code == 200 and not done.json()["already_committed"]:
                    with tally.lock:
                        tally.consolidated += body["source_ids"]
            except httpx2.TransportError:
                if not survive:
                    return  # the server is gone: a loop keeps no state, a later one resumes
                time.sleep(0.1)
    finally:
        for client in clients:
            client.close()


def run_workers(urls: list[str], key: str, tally: Tally, seconds: float, survive: bool) -> None:
    stop_at = time.monotonic() + seconds
    threads = [
        threading.Thread(
            target=work,
            args=(urls[i % len(urls) :] + urls[: i % len(urls)], key, tally, stop_at, survive),
        )
        for i in range(WORKERS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + 60)


def open_store(database_url: str) -> AnyStore:
    if database_url.startswith("sqlite:///"):
        return SQLiteStore(database_url.removeprefix("sqlite:///"))
    return PostgresStore(database_url, pool_min=0, pool_max=2)


def new_vault(database_url: str) -> tuple[str, AnyStore]:
    store = open_store(database_url)
    key, _ = VaultService(store, clock=FakeClock(), lease_seconds=900).create_vault()
    return key, store


def check(store_sql: Query, tally: Tally) -> None:
    assert tally.server_errors == 0, tally.statuses
    assert len(tally.consolidated) == len(set(tally.consolidated)) == RAW  # exactly once
    left = store_sql("SELECT count(*) FROM memories WHERE tier = 1 AND consolidated = 0")
    assert left[0][0] == 0
    per_child = store_sql(
        "SELECT l.child_id, count(*) FROM lineage l JOIN memories p ON p.id = l.parent_id "
        "GROUP BY l.child_id"
    )
    assert len(per_child) == RAW and {n for _, n in per_child} == {1}  # lineage complete
    for batch_id, committed, sources, reflections, linked in store_sql(BATCHES):
        assert (reflections, linked) == ((1, sources) if committed else (0, 0)), batch_id


Query = Callable[[str], list[tuple[Any, ...]]]


def sql_of(store: AnyStore) -> Query:
    """Read the database directly, from outside the servers."""

    def run(statement: str) -> list[tuple[Any, ...]]:
        if isinstance(store, SQLiteStore):
            lite = sqlite3.connect(store._path)
            try:
                return lite.execute(statement).fetchall()
            finally:
                lite.close()
        with psycopg.connect(store.url) as conn:
            return conn.execute(statement.encode()).fetchall()

    return run


@pytest.fixture
def pg_url(postgres_databases: pg.Databases) -> Iterator[str]:
    url = postgres_databases.create()
    yield url
    postgres_databases.release(url)


@pytest.mark.postgres
def test_two_replicas_and_16_workers_consolidate_every_memory_exactly_once(
    pg_url: str, tmp_path: Path
) -> None:
    key, store = new_vault(pg_url)
    with (
        server_process(pg_url, tmp_path, 900) as (one, _),
        server_process(pg_url, tmp_path, 900) as (two, _),
    ):
        ingest(one, key, RAW)
        tally = Tally()
        run_workers([one, two], key, tally, 120, survive=False)
    check(sql_of(store), tally)
    store.close()


def test_one_sqlite_server_and_16_workers_consolidate_every_memory_exactly_once(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'vault.sqlite3'}"
    key, store = new_vault(url)
    with server_process(url, tmp_path, 900) as (one, _):
        ingest(one, key, RAW)
        tally = Tally()
        run_workers([one], key, tally, 120, survive=False)
    check(sql_of(store), tally)
    store.close()


@pytest.mark.postgres
def test_a_server_killed_mid_commit_leaves_no_partial_commit(pg_url: str, tmp_path: Path) -> None:
    key, store = new_vault(pg_url)
    sql = sql_of(store)
    lease = 4
    tally = Tally()
    with server_process(pg_url, tmp_path, lease) as (victim, process):
        ingest(victim, key, RAW)

        def kill_soon() -> None:
            deadline = time.monotonic() + 60
            while len(tally.consolidated) < RAW // 4 and time.monotonic() < deadline:
                time.sleep(0.02)
            process.send_signal(signal.SIGKILL)

        killer = threading.Thread(target=kill_soon)
        killer.start()
        run_workers([victim], key, tally, 60, survive=False)  # they stop when it dies
        killer.join(timeout=60)
        assert process.wait(timeout=10) == -signal.SIGKILL
    # Every batch is whole: all of its reflection, lineage and marks, or none.
    for batch_id, committed, sources, reflections, linked in sql(BATCHES):
        assert (reflections, linked) == ((1, sources) if committed else (0, 0)), batch_id
    assert sql("SELECT count(*) FROM batches WHERE committed_ms IS NOT NULL")[0][0] > 0
    # Restart: the dead server's leases run out, the loop finishes with no client-side state.
    with server_process(pg_url, tmp_path, lease) as (again, _):
        run_workers([again], key, Tally(), 120, survive=False)
    assert sql("SELECT count(*) FROM memories WHERE tier = 1 AND consolidated = 0")[0][0] == 0
    per_child = sql("SELECT child_id, count(*) FROM lineage GROUP BY child_id")
    assert len(per_child) == RAW and {n for _, n in per_child} == {1}
    for batch_id, committed, sources, reflections, linked in sql(BATCHES):
        assert (reflections, linked) == ((1, sources) if committed else (0, 0)), batch_id
    store.close()
