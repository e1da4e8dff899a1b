"""A database restart or failover under load: PostgreSQL stopped (a fast shutdown, every
session ended) while clients ingest, commit consolidation batches and refresh OAuth tokens,
then started again at the same address, reached directly or through PgBouncer.

While the database is away every request is answered, in seconds, with 503 and
``Retry-After`` (the error envelope, or RFC 6749's shape on /token); the server reconnects by
itself when the database is back; and everything it acknowledged is in the database after.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest

from tests import pg, pgbouncer
from tests.auth.test_replicas import cluster, code_on, exchange, register
from tests.support.oauth import pkce

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

OUTAGE_SECONDS = 4.0
INGESTERS = 3
ANSWER_WITHIN = 8.0  # the slowest 503 (through PgBouncer: its query_wait_timeout, 5 s)
BACK_WITHIN = 15.0  # from the database's return to the first acknowledged write


@dataclass
class Database:
    server: pgbouncer.OwnServer
    url: str  # what the replicas are given
    direct: str  # the database itself, to count what it kept


@pytest.fixture(params=["direct", "pgbouncer"])
def database(request: pytest.FixtureRequest) -> Iterator[Database]:
    if not pg.available():
        pytest.skip("no PostgreSQL for the store tests (MEMORYROUTER_TEST_POSTGRES)")
    if request.param == "pgbouncer":
        pgbouncer.required()
    with pgbouncer.own_server() as server:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE vault")
        direct = pg.with_database(server.url, "vault")
        if request.param == "direct":
            yield Database(server, direct, direct)
            return
        with pgbouncer.bouncer(server.url) as address:
            yield Database(server, address + "/vault", direct)


@dataclass
class Load:
    """What the clients were told, and when."""

    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    acknowledged: list[str] = field(default_factory=list)  # ingested texts answered 202
    committed: list[str] = field(default_factory=list)  # batch ids answered 200
    refreshed: list[float] = field(default_factory=list)  # when a refresh was answered 200
    written: list[float] = field(default_factory=list)  # when an ingest was answered 202
    unavailable: list[float] = field(default_factory=list)  # seconds each 503 took
    wrong: list[str] = field(default_factory=list)  # any other answer

    def refused(self, response: httpx2.Response, took: float, oauth: bool) -> None:
        """A 503, checked: Retry-After, the envelope, a message that says what to do."""
        body = response.json()
        error = body["error"] if oauth else body["error"]["code"]
        message = body["error_description"] if oauth else body["error"]["message"]
        ok = (
            response.headers.get("retry-after", "").isdigit()
            and error == ("temporarily_unavailable" if oauth else "store_unavailable")
            and ("try again" in message or "retry after" in message)
        )
        with self.lock:
            self.unavailable.append(took)
            if not ok:
                self.wrong.append(f"503 {response.headers} {body}")

    def answered(
        self, response: httpx2.Response | None, took: float, failed: str, what: str
    ) -> None:
        """A page or a call that must be a 200, or a 503 that names when to try again."""
        if response is not None and response.status_code == 503:
            with self.lock:
                self.unavailable.append(took)
                if not response.headers.get("retry-after", "").isdigit():
                    self.wrong.append(f"{what} 503 without Retry-After: {response.text[:200]}")
        elif response is None or response.status_code != 200:
            self.other(failed or f"{what} {response and response.status_code}")

    def other(self, what: str) -> None:
        with self.lock:
            self.wrong.append(what)


def timed(
    call: Callable[..., httpx2.Response], *args: Any, **kwargs: Any
) -> tuple[httpx2.Response | None, float, str]:
    """``call(*args, **kwargs)``: its response (None when it failed, and why), its time."""
    started = time.monotonic()
    try:
        response = call(*args, **kwargs)
    except httpx2.HTTPError as exc:
        return None, time.monotonic() - started, f"{type(exc).__name__}: {exc}"
    return response, time.monotonic() - started, ""


def ingester(base: str, key: str, load: Load, n: int) -> None:
    with httpx2.Client(base_url=base, headers={"X-Memory-Key": key}, timeout=60) as http:
        sent = 0
        while not load.stop.is_set():
            text = f"Client {n}, fact {sent}: the meeting moved to room {sent % 17}."
            response, took, failed = timed(
                http.post, "/v1/memory/ingest", json={"messages": [{"content": text}]}
            )
            sent += 1
            if response is not None and response.status_code == 202:
                with load.lock:
                    load.acknowledged.append(text)
                    load.written.append(time.monotonic())
            elif response is not None and response.status_code == 503:
                load.refused(response, took, oauth=False)
            else:
                load.other(failed or f"ingest {response and response.status_code}")


def consolidator(base: str, key: str, load: Load) -> None:
    with httpx2.Client(base_url=base, headers={"X-Memory-Key": key}, timeout=60) as http:
        while not load.stop.is_set():
            checkout = {"tier": 1, "max_tokens": 200}
            batch, took, failed = timed(http.post, "/v1/memory/consolidate/checkout", json=checkout)
            if batch is not None and batch.status_code == 503:
                load.refused(batch, took, oauth=False)
                continue
            if batch is None or batch.status_code != 200:
                load.other(failed or f"checkout {batch and batch.status_code}")
                continue
            batch_id = batch.json()["batch_id"]
            if batch_id is None:
                time.sleep(0.05)
                continue
            entries = [{"text": "The meeting moved rooms more than once.", "importance": 5}]
            body = {"batch_id": batch_id, "entries": entries}
            done, took, failed = timed(http.post, "/v1/memory/consolidate/commit", json=body)
            if done is not None and done.status_code == 200:
                with load.lock:
                    load.committed.append(batch_id)
            elif done is not None and done.status_code == 503:
                load.refused(done, took, oauth=False)  # the lease runs out; rows come back
            else:
                load.other(failed or f"commit {done and done.status_code}")


def reader(base: str, key: str, load: Load) -> None:
    """A person on the explorer's pages: a 503 page names when to try again."""
    with httpx2.Client(base_url=base, timeout=60) as browser:
        form = browser.get("/ui/sign-in")
        signed_in = browser.post(
            "/ui/sign-in",
            data={"csrf": form.cookies["memoryrouter_ui_signin"], "next": "/ui", "key": key},
            headers={"Origin": base},
        )
        assert signed_in.status_code == 303, signed_in.text
        while not load.stop.is_set():
            load.answered(*timed(browser.get, "/ui"), "explorer")
            time.sleep(0.1)


def lister(base: str, token: str, load: Load) -> None:
    """An MCP client with an OAuth token: ``tools/list``, its token checked each time."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    with httpx2.Client(base_url=base, timeout=60) as http:
        while not load.stop.is_set():
            load.answered(*timed(http.post, "/mcp", json=call, headers=headers), "/mcp")
            time.sleep(0.1)


def refresher(base: str, client_id: str, token: str, load: Load) -> None:
    http = httpx2.Client(base_url=base, timeout=60)
    while not load.stop.is_set():
        form = {"grant_type": "refresh_token", "client_id": client_id, "refresh_token": token}
        response, took, failed = timed(http.post, "/token", data=form)
        if response is not None and response.status_code == 200:
            token = response.json()["refresh_token"]
            with load.lock:
                load.refreshed.append(time.monotonic())
        elif response is not None and response.status_code == 503:
            load.refused(response, took, oauth=True)
        else:
            load.other(failed or f"refresh {response and response.status_code}")
        time.sleep(0.05)
    http.close()


def found(direct: str) -> tuple[set[str], set[str]]:
    """(the raw texts, the committed batches) the database kept."""
    with psycopg.connect(direct) as conn:
        texts = conn.execute("SELECT content FROM memories WHERE tier = 1").fetchall()
        batches = conn.execute("SELECT id FROM batches WHERE committed_ms IS NOT NULL")
        return {t for (t,) in texts}, {b for (b,) in batches.fetchall()}


async def test_a_database_restart_under_load_loses_nothing_acknowledged(
    database: Database, tmp_path: Path
) -> None:
    limits = {"rate_limit_per_minute": 0, "oauth_rate_limit_per_minute": 0}
    with cluster(database.url, tmp_path, replicas=1, **limits) as c:
        base = c.bases[0]
        client_id = register(base)
        verifier, challenge = pkce()
        code = await code_on(c, base, client_id, challenge)
        tokens = exchange(c, base, client_id, code, verifier).json()
        load = Load()
        workers = [
            *(
                threading.Thread(target=ingester, args=(base, c.key, load, n))
                for n in range(INGESTERS)
            ),
            threading.Thread(target=consolidator, args=(base, c.key, load)),
            threading.Thread(
                target=refresher, args=(base, client_id, tokens["refresh_token"], load)
            ),
            threading.Thread(target=reader, args=(base, c.key, load)),
            threading.Thread(target=lister, args=(base, tokens["access_token"], load)),
        ]
        for worker in workers:
            worker.start()
        try:
            time.sleep(1.5)
            database.server.stop()
            time.sleep(OUTAGE_SECONDS)
            database.server.start()
            back = time.monotonic()
            deadline = back + BACK_WITHIN + 5
            while time.monotonic() < deadline and not (
                [t for t in load.written if t > back] and [t for t in load.refreshed if t > back]
            ):
                time.sleep(0.1)
            time.sleep(1.0)
        finally:
            load.stop.set()
            for worker in workers:
                worker.join(timeout=90)
    texts, batches = found(database.direct)
    lost = [t for t in load.acknowledged if t not in texts]
    print(
        f"\n{database.url.split('@')[-1]}: {len(load.acknowledged)} writes acknowledged, "
        f"{len(load.acknowledged) - len(lost)} found; {len(load.committed)} commits "
        f"acknowledged, {len(set(load.committed) & batches)} found; {len(load.refreshed)} "
        f"refreshes; {len(load.unavailable)} answers 503 (slowest "
        f"{max(load.unavailable, default=0):.1f} s); back "
        f"{min((t for t in load.written if t > back), default=float('inf')) - back:.1f} s "
        "after the database"
    )
    assert load.wrong == []
    assert load.unavailable, "no request met the outage"
    assert max(load.unavailable) < ANSWER_WITHIN
    assert lost == []
    assert set(load.committed) <= batches
    assert min(t for t in load.written if t > back) - back < BACK_WITHIN
    assert [t for t in load.refreshed if t > back]  # the token's chain goes on
