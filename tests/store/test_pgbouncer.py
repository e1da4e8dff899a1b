"""PostgreSQL as operators run it: through a real PgBouncer (Debian's) in transaction pooling
mode, where a server connection is lent per transaction. Every use case of the vault, the
authorization server's and the explorer's state on two replicas, replicas migrating at once,
a statement's bound; and statement pooling, where nothing can work, refused at start."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import psycopg
import pytest
from psycopg import sql

from mcp_memoryrouter.auth.state import database
from mcp_memoryrouter.auth.state.database import AUTH_MIGRATIONS, PostgresPool
from mcp_memoryrouter.errors import ConfigError, StoreUnavailable
from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.store.postgres import PostgresStore
from mcp_memoryrouter.vault.store.postgres import lexical as pg_lexical
from mcp_memoryrouter.vault.store.sql import MIGRATIONS
from tests import pg, pgbouncer
from tests.auth.test_replicas import cluster, code_on, exchange, refresh, register, tools_list
from tests.store.recorder import Recording
from tests.store.workload import Embedder, Workload, exercise
from tests.support import make_vault
from tests.support.oauth import pkce

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]


def advisory_locks(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()
    return int(row[0]) if row else 0


@pytest.fixture
def pooled(postgres_databases: pg.Databases) -> Iterator[tuple[str, str]]:
    """(the test database through PgBouncer in transaction mode, the same directly)."""
    pgbouncer.required()
    url = postgres_databases.create()
    try:
        with pgbouncer.bouncer(postgres_databases.admin_url) as address:
            yield address + urlsplit(url).path, url
    finally:
        postgres_databases.release(url)


def test_every_use_case_of_the_vault_works_through_pgbouncer(
    pooled: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The REST API's every route, the embedding worker (``SKIP LOCKED``), an HNSW index
    built under an advisory lock and searched with ``SET LOCAL`` plans, server-side cursors
    (the reflector's window, the export's snapshot): each in a transaction of its own."""
    through, direct = pooled
    monkeypatch.setattr(pg_lexical, "PRUNE_FROM_ROWS", 10)  # the common-words sample runs
    store = PostgresStore(through, pool_min=0, pool_max=4, exact_max=8)
    try:
        embedders = Embedders({"concepts": Embedder}, "concepts")
        vault = make_vault(tmp_path, store=lambda _: store, embedders=embedders)
        workload = Workload(vault, Recording())
        exercise(workload)  # each call asserts its status
        vault.http.close()
        assert len(workload.calls) > 40
        with psycopg.connect(direct) as conn:  # the HNSW path was taken, its index built
            row = conn.execute(
                "SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'vectors_hnsw_%'"
            ).fetchone()
        assert row is not None and row[0] >= 1
    finally:
        store.close()
    assert advisory_locks(direct) == 0  # no lock outlived its transaction


async def test_oauth_and_the_explorer_work_through_pgbouncer_on_two_replicas(
    pooled: tuple[str, str], tmp_path: Path
) -> None:
    """Registration, sign-in, consent, the code, a refresh, the signing keys, a token's
    check on /mcp and an explorer session, each step on another replica, all through
    PgBouncer (the state's pool used to pass its statement bound as a startup option,
    which PgBouncer refuses: no replica started)."""
    through, direct = pooled
    with cluster(through, tmp_path, replicas=2) as c:
        a, b = c.bases
        client_id = register(a)
        verifier, challenge = pkce()
        code = await code_on(c, b, client_id, challenge)
        issued = exchange(c, a, client_id, code, verifier)
        assert issued.status_code == 200, issued.text
        renewed = refresh(b, client_id, issued.json()["refresh_token"])
        assert renewed.status_code == 200, renewed.text
        for base in c.bases:
            assert tools_list(base, renewed.json()["access_token"]) == 200
        with httpx2.Client(base_url=b, timeout=30) as browser:
            form = browser.get("/ui/sign-in")
            signed_in = browser.post(
                "/ui/sign-in",
                data={"csrf": form.cookies["memoryrouter_ui_signin"], "next": "/ui", "key": c.key},
                headers={"Origin": b},
            )
            assert signed_in.status_code == 303, signed_in.text
            assert browser.get("/ui").status_code == 200
    assert advisory_locks(direct) == 0


def test_a_statement_keeps_its_bound_through_pgbouncer(
    pooled: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state's statements are bounded by ``SET LOCAL statement_timeout`` in their own
    transaction, which PgBouncer lets through and which never outlives the statement."""
    through, _ = pooled
    monkeypatch.setattr(database, "WAIT_SECONDS", 1.0)
    pool = PostgresPool(through)
    try:
        state = pool.database(AUTH_MIGRATIONS)
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            state.one("SELECT pg_sleep(20)")
        assert time.monotonic() - started < 5
        assert state.one("SELECT current_setting('statement_timeout') AS t") == {"t": "1s"}
        assert state.one("SELECT 1 AS one") == {"one": 1}
    finally:
        pool.close()
    with psycopg.connect(through) as conn:  # a server connection PgBouncer lends next
        shown = conn.execute("SHOW statement_timeout").fetchone()
    assert shown == ("0",)


def test_replicas_starting_together_through_pgbouncer_migrate_once(
    postgres_databases: pg.Databases,
) -> None:
    pgbouncer.required()
    name = f"mr_pgbouncer_{time.monotonic_ns()}"
    admin = postgres_databases.admin_url
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        with pgbouncer.bouncer(admin) as address:
            stores: list[PostgresStore] = []
            failures: list[BaseException] = []

            def start() -> None:
                try:
                    stores.append(PostgresStore(f"{address}/{name}", pool_min=0, pool_max=1))
                except BaseException as exc:
                    failures.append(exc)

            threads = [threading.Thread(target=start) for _ in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            for store in stores:
                store.close()
        assert not failures and len(stores) == 3
        direct = pg.with_database(admin, name)
        with psycopg.connect(direct) as conn:
            versions = conn.execute("SELECT version FROM schema_migrations").fetchall()
        assert sorted(v for (v,) in versions) == [s.version for s in MIGRATIONS.scripts("postgres")]
        assert advisory_locks(direct) == 0
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def test_statement_pooling_is_refused_at_start_with_the_reason(
    postgres_databases: pg.Databases,
) -> None:
    pgbouncer.required()
    url = postgres_databases.create()
    try:
        with pgbouncer.bouncer(postgres_databases.admin_url, mode="statement") as address:
            with pytest.raises(ConfigError, match=r"statement pooling mode.*pool_mode = trans"):
                PostgresStore(address + urlsplit(url).path, pool_min=0, pool_max=1)
            state = PostgresPool(address + urlsplit(url).path)
            try:
                with pytest.raises(ConfigError, match="pool_mode = transaction"):
                    state.database(AUTH_MIGRATIONS)
            finally:
                state.close()
    finally:
        postgres_databases.release(url)
