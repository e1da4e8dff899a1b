"""The embedded authorization server and the explorer behind several replicas over one
PostgreSQL: each replica is a real uvicorn on loopback with its own data directory, all with
the same public URL, sharing only the database and the sealing key file. A flow's steps land
on different replicas; a code redeemed on two at once succeeds once; signing keys rotate."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import psycopg
import pytest
from cryptography.fernet import Fernet

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.auth.state.database import PostgresPool
from mcp_memoryrouter.auth.state.sealing import Sealer
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.errors import ConfigError
from mcp_memoryrouter.ui.sessions import UiSessions
from tests import pg
from tests.auth.oidc_idp import Idp, running_idp
from tests.support import Clock, free_port
from tests.support.oauth import REDIRECT_URI, Browser, pkce, read_form, serve

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

DAY = 86_400
ACCESS_SECONDS = 900


@dataclass
class Cluster:
    public: str  # every replica's issuer (the first replica's own address)
    bases: list[str]  # where each replica listens
    key: str  # a memory key of a vault in the shared database
    clock: Clock
    url: str  # the database
    data_dirs: list[Path]
    stops: list[Callable[[], None]] = field(default_factory=list)  # stop replica i now

    @property
    def resource(self) -> str:
        return self.public + "/mcp"


class RoutedBrowser(Browser):
    """A browser whose requests to the public URL go to one chosen replica (a load balancer
    that sends this step there); the cookie jar is shared across replicas (same host)."""

    public: str = ""
    to: str = ""

    def _routed(self, url: str) -> str:
        if url.startswith(self.public):
            return self.to + url.removeprefix(self.public)
        if url.startswith("/"):
            return self.to + url
        return url

    async def get(self, url: str) -> httpx2.Response:
        return await super().get(self._routed(url))

    async def post(self, url: str, data: dict[str, Any]) -> httpx2.Response:
        return await super().post(self._routed(url), data)


def _socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def cluster(url: str, folder: Path, replicas: int = 3, **settings: Any) -> Iterator[Cluster]:
    socks = [_socket() for _ in range(replicas)]
    bases = [f"http://127.0.0.1:{s.getsockname()[1]}" for s in socks]
    sealing = folder / "sealing.key"  # what a Kubernetes secret would mount on every replica
    sealing.write_bytes(Fernet.generate_key())
    os.chmod(sealing, 0o600)
    clock = Clock()
    with ExitStack() as stack:
        service = None
        stops: list[Callable[[], None]] = []
        for i, sock in enumerate(socks):
            config = Settings(
                data_dir=folder / f"replica{i}",
                database_url=url,
                embeddings="none",
                public_url=bases[0],
                sealing_key_file=sealing,
                db_pool_min=0,
                db_pool_max=2,
                **settings,
            )
            server = create_server(config, clock=clock)
            service = service or server.service
            own = stack.enter_context(ExitStack())
            own.enter_context(serve(server.app, sock))
            stops.append(own.close)
        assert service is not None
        key, _ = service.create_vault()
        dirs = [folder / f"replica{i}" for i in range(replicas)]
        yield Cluster(bases[0], bases, key, clock, url, dirs, stops)


@pytest.fixture
def pg_url(postgres_databases: pg.Databases) -> Iterator[str]:
    url = postgres_databases.create()
    yield url
    postgres_databases.release(url)


@pytest.fixture
def three(pg_url: str, tmp_path: Path) -> Iterator[Cluster]:
    with cluster(pg_url, tmp_path) as c:
        yield c


def register(base: str) -> str:
    response = httpx2.post(
        base + "/register",
        json={
            "client_name": "Replica test client",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        },
    )
    assert response.status_code == 201, response.text
    client_id: str = response.json()["client_id"]
    return client_id


def authorize_url(c: Cluster, client_id: str, challenge: str) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "st4te",
        "scope": "memories:read memories:write",
        "resource": c.resource,
    }
    return str(httpx2.URL(c.public + "/authorize", params=params))


async def code_on(c: Cluster, base: str, client_id: str, challenge: str) -> str:
    """Authorize, sign in and consent with every page served by the replica at ``base``."""
    browser = RoutedBrowser(c.key)
    browser.public, browser.to = c.public, base
    try:
        callback = await browser.authorize(authorize_url(c, client_id, challenge))
    finally:
        await browser.aclose()
    assert all(url.startswith(base) for url in browser.visited), browser.visited
    return callback["code"]


def exchange(c: Cluster, base: str, client_id: str, code: str, verifier: str) -> httpx2.Response:
    data = {
        "grant_type": "authorization_code",
        "client_id": client_id,
        "code": code,
        "code_verifier": verifier,
        "redirect_uri": REDIRECT_URI,
        "resource": c.resource,
    }
    return httpx2.post(base + "/token", data=data)


def refresh(base: str, client_id: str, token: str) -> httpx2.Response:
    data = {"grant_type": "refresh_token", "client_id": client_id, "refresh_token": token}
    return httpx2.post(base + "/token", data=data)


def tools_list(base: str, token: str) -> int:
    response = httpx2.post(
        base + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        },
        timeout=30,
    )
    if response.status_code == 200:
        assert response.json()["result"]["tools"]
    return response.status_code


def kids(base: str) -> set[str]:
    response = httpx2.get(base + "/jwks.json")
    assert response.status_code == 200
    return {key["kid"] for key in response.json()["keys"]}


def header_kid(token: str) -> str:
    head = token.split(".")[0]
    raw = base64.urlsafe_b64decode(head + "=" * (-len(head) % 4))
    kid: str = json.loads(raw)["kid"]
    return kid


async def test_an_oauth_flow_spread_over_three_replicas(three: Cluster) -> None:
    a, b, c = three.bases
    client_id = register(a)
    verifier, challenge = pkce()
    code = await code_on(three, b, client_id, challenge)
    issued = exchange(three, c, client_id, code, verifier)
    assert issued.status_code == 200, issued.text
    tokens = issued.json()
    renewed = refresh(a, client_id, tokens["refresh_token"])
    assert renewed.status_code == 200, renewed.text
    access = renewed.json()["access_token"]
    for base in three.bases:  # every replica accepts both access tokens
        assert tools_list(base, access) == 200
        assert tools_list(base, tokens["access_token"]) == 200
    # the rotated refresh token is spent everywhere
    assert refresh(c, client_id, tokens["refresh_token"]).status_code == 400

    revoked = httpx2.post(b + "/revoke", data={"client_id": client_id, "token": access})
    assert revoked.status_code == 200
    for base in three.bases:
        assert tools_list(base, access) == 401
        assert tools_list(base, tokens["access_token"]) == 401  # the whole grant
    for folder in three.data_dirs:  # nothing of it was kept in a replica's own directory
        kept = {p.name for p in folder.iterdir()}
        assert not kept & {"auth.sqlite3", "ui.sqlite3", "oauth-signing-key.json"}, kept
        assert "oauth-sealing.key" not in kept  # the shared file is used instead


async def test_a_replica_stopped_mid_flow_leaves_the_flow_whole_on_the_others(
    three: Cluster,
) -> None:
    a, b, c = three.bases
    client_id = register(a)  # registered on A, which then goes away
    three.stops[0]()
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(a + "/.well-known/oauth-authorization-server")
    verifier, challenge = pkce()
    code = await code_on(three, b, client_id, challenge)
    issued = exchange(three, c, client_id, code, verifier)
    assert issued.status_code == 200, issued.text
    renewed = refresh(b, client_id, issued.json()["refresh_token"])
    assert renewed.status_code == 200, renewed.text
    for base in (b, c):
        assert tools_list(base, renewed.json()["access_token"]) == 200


@contextmanager
def replica_process(c: Cluster, folder: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """One more replica, ``mcp-memoryrouter serve`` in a process of its own (one that can be
    killed), configured as the others: the database, the sealing key file, the public URL."""
    port = free_port()
    env = {
        **os.environ,
        "MEMORYROUTER_DATA_DIR": str(folder / "killed"),
        "MEMORYROUTER_DATABASE_URL": c.url,
        "MEMORYROUTER_SEALING_KEY_FILE": str(folder / "sealing.key"),
        "MEMORYROUTER_PUBLIC_URL": c.public,
        "MEMORYROUTER_EMBEDDINGS": "none",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_memoryrouter", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx2.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("the replica process did not start within 60 s")
            time.sleep(0.1)
        yield base, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


async def test_a_replica_killed_mid_sign_in_leaves_the_flow_whole_on_the_others(
    three: Cluster, tmp_path: Path
) -> None:
    """SIGKILL between two steps of one person's sign-in: the client was registered, the
    request authorized and the sign-in page served by the replica that dies; the person
    signs in on B, consents on C, and the connector gets and uses its tokens elsewhere."""
    _, b, c = three.bases
    browser = RoutedBrowser(three.key)
    browser.public = three.public
    try:
        with replica_process(three, tmp_path) as (doomed, process):
            client_id = register(doomed)
            verifier, challenge = pkce()
            browser.to = doomed
            started = await browser.get(authorize_url(three, client_id, challenge))
            assert started.status_code == 302, started.text
            sign_in = await browser.get(started.headers["location"])
            assert sign_in.status_code == 200 and sign_in.url.host == "127.0.0.1"
            form = read_form(sign_in.text)
            process.send_signal(signal.SIGKILL)
            assert process.wait(timeout=10) == -signal.SIGKILL
        with pytest.raises(httpx2.ConnectError):
            httpx2.get(doomed + "/healthz")
        browser.to = b  # the load balancer sends the next steps elsewhere
        here = three.public + sign_in.url.raw_path.decode()
        posted = await browser.post(here, {**form.fields, "memory_key": three.key})
        assert posted.status_code == 303, posted.text
        consent = await browser.get(three.public + posted.headers["location"])
        assert consent.status_code == 200, consent.text
        browser.to = c
        chosen = read_form(consent.text)
        done = await browser.post(
            three.public + consent.url.raw_path.decode(),
            {**chosen.fields, "scope": chosen.scopes, "decision": "allow"},
        )
        assert done.status_code == 303, done.text
        assert done.headers["location"].startswith(REDIRECT_URI)
        code = parse_qs(urlsplit(done.headers["location"]).query)["code"][0]
    finally:
        await browser.aclose()
    issued = exchange(three, b, client_id, code, verifier)
    assert issued.status_code == 200, issued.text
    for base in (b, c):
        assert tools_list(base, issued.json()["access_token"]) == 200


async def test_a_stalled_authorization_database_does_not_stall_the_replica(
    three: Cluster,
) -> None:
    """The grant behind a token is read off the event loop: while that read waits on a locked
    table, the same replica keeps answering other requests at once (it used to freeze for
    the whole wait, up to the 5 s statement timeout)."""
    a = three.bases[0]
    client_id = register(a)
    verifier, challenge = pkce()
    code = await code_on(three, a, client_id, challenge)
    token = exchange(three, a, client_id, code, verifier).json()["access_token"]
    stalled: list[int] = []
    with psycopg.connect(three.url) as blocker:
        blocker.execute("LOCK TABLE oauth_grants IN ACCESS EXCLUSIVE MODE")
        waiting = threading.Thread(target=lambda: stalled.append(tools_list(a, token)))
        waiting.start()
        time.sleep(0.5)  # the token's check now waits on the lock
        started = time.monotonic()
        assert httpx2.get(a + "/healthz", timeout=10).status_code == 200
        assert time.monotonic() - started < 1.0
        assert waiting.is_alive()
        blocker.rollback()  # the database answers again
    waiting.join(timeout=30)
    assert stalled == [200]
    assert tools_list(a, token) == 200


def test_a_stalled_explorer_session_table_does_not_stall_the_replica(three: Cluster) -> None:
    """The explorer's session is read off the event loop too."""
    a = three.bases[0]
    with httpx2.Client(base_url=a, timeout=30) as browser:
        form = browser.get("/ui/sign-in")
        token = form.cookies["memoryrouter_ui_signin"]
        signed_in = browser.post(
            "/ui/sign-in",
            data={"csrf": token, "next": "/ui", "key": three.key},
            headers={"Origin": a},
        )
        assert signed_in.status_code == 303, signed_in.text
        pages: list[int] = []
        with psycopg.connect(three.url) as blocker:
            blocker.execute("LOCK TABLE ui_sessions IN ACCESS EXCLUSIVE MODE")
            waiting = threading.Thread(target=lambda: pages.append(browser.get("/ui").status_code))
            waiting.start()
            time.sleep(0.5)  # the page's session check now waits on the lock
            started = time.monotonic()
            assert httpx2.get(a + "/healthz", timeout=10).status_code == 200
            assert time.monotonic() - started < 1.0
            assert waiting.is_alive()
            blocker.rollback()
        waiting.join(timeout=30)
    assert pages == [200]


async def test_a_code_redeemed_on_two_replicas_at_once_succeeds_once(three: Cluster) -> None:
    a, b, c = three.bases
    for _ in range(3):
        client_id = register(c)
        verifier, challenge = pkce()
        code = await code_on(three, a, client_id, challenge)
        assert sorted(race(three, [a, b], client_id, code, verifier)) == [200, 400]


def race(c: Cluster, bases: list[str], client_id: str, code: str, verifier: str) -> list[int]:
    """The statuses of one code exchanged on each of ``bases`` at the same moment."""
    start = threading.Barrier(len(bases))
    answers: list[int] = []

    def redeem(base: str) -> None:
        start.wait()
        answers.append(exchange(c, base, client_id, code, verifier).status_code)

    threads = [threading.Thread(target=redeem, args=(base,)) for base in bases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return answers


async def test_a_session_made_on_one_replica_works_on_another(three: Cluster) -> None:
    a, b, c = three.bases
    with httpx2.Client(timeout=30) as browser:
        form = browser.get(a + "/ui/sign-in")
        assert form.status_code == 200
        fields = read_form(form.text).fields
        signed = browser.post(a + "/ui/sign-in", data={**fields, "key": three.key})
        assert signed.status_code == 303, signed.text
        for base in (b, c):
            page = browser.get(base + "/ui")
            assert page.status_code == 200, page.text
            assert "/ui/sign-in" not in str(page.url)


def test_replicas_share_one_set_of_signing_keys(three: Cluster) -> None:
    published = [kids(base) for base in three.bases]
    assert len(published[0]) == 1
    assert published == [published[0]] * 3
    with psycopg.connect(three.url) as conn:
        rows = conn.execute("SELECT kid, sealed_jwk FROM oauth_signing_keys").fetchall()
    assert [r[0] for r in rows] == list(published[0])
    assert '"d"' not in rows[0][1]  # the private key is sealed, not stored as is


async def test_a_rotated_signing_key_keeps_earlier_tokens_until_they_expire(
    pg_url: str, tmp_path: Path
) -> None:
    with cluster(pg_url, tmp_path, oauth_signing_key_days=1) as c:
        a, b, third = c.bases
        first = kids(a)
        c.clock.advance(DAY - 100)  # the first key signs for another 100 s
        client_id = register(a)
        verifier, challenge = pkce()
        code = await code_on(c, b, client_id, challenge)
        tokens = exchange(c, third, client_id, code, verifier).json()
        early = tokens["access_token"]
        assert {header_kid(early)} == first

        c.clock.advance(200)  # it has stopped signing: the next token is signed by a new key
        renewed = refresh(b, client_id, tokens["refresh_token"])
        assert renewed.status_code == 200, renewed.text
        late = renewed.json()["access_token"]
        assert header_kid(late) not in first
        for base in c.bases:  # replicas pick the new key up without a restart
            assert kids(base) == first | {header_kid(late)}
            assert tools_list(base, early) == 200
            assert tools_list(base, late) == 200

        c.clock.advance(ACCESS_SECONDS - 50)  # every token of the first key has expired
        for base in c.bases:
            assert kids(base) == {header_kid(late)}
            assert tools_list(base, early) == 401
            assert tools_list(base, late) == 200


def test_a_replica_sealing_with_another_key_refuses_to_start(
    three: Cluster, tmp_path: Path
) -> None:
    config = Settings(
        data_dir=tmp_path / "stray",
        database_url=three.url,
        embeddings="none",
        public_url=three.public,
        sealing_key=Fernet.generate_key().decode(),
    )
    with pytest.raises(ConfigError, match="MEMORYROUTER_SEALING_KEY"):
        create_server(config, clock=three.clock)


def test_explorer_sessions_in_postgresql(three: Cluster) -> None:
    pool = PostgresPool(three.url)
    sealer = Sealer(Fernet.generate_key())
    try:
        one, two = UiSessions.postgres(pool, sealer), UiSessions.postgres(pool, sealer)
        session = one.start("vault-1", "mr_secret", False, 1000.0)
        found = two.find(session.secret, 1010.0)
        assert found is not None and found.key == "mr_secret" and found.csrf == session.csrf
        one.show_once(session.secret, "a new key")
        assert two.take_shown_once(session.secret) == "a new key"
        assert one.take_shown_once(session.secret) is None  # taken once, wherever
        with psycopg.connect(three.url) as conn:
            stored = conn.execute("SELECT sealed_key FROM ui_sessions").fetchone()
        assert stored is not None and "mr_secret" not in stored[0]
        two.end(session.secret)
        assert one.find(session.secret, 1020.0) is None
    finally:
        pool.close()


def oidc_sign_in(c: Cluster, idp: Idp, login: str, at: str, back_at: str) -> dict[str, str]:
    """A fresh browser signs in at the identity provider as ``login``: the sign-in page on
    replica ``at``, the provider's callback (sent to the public URL) on ``back_at``, consent
    there; what the pending request was bound to (vault, scopes)."""
    with httpx2.Client(timeout=30) as browser:
        client_id = register(at)
        _, challenge = pkce()
        first = browser.get(authorize_url(c, client_id, challenge).replace(c.public, at))
        page = browser.get(at + first.headers["location"].removeprefix(c.public))
        started = browser.post(at + "/oauth/oidc/start", data=read_form(page.text).fields)
        callback = idp.sign_in(browser, started.headers["location"], login)
        assert callback.startswith(c.public + "/oauth/oidc/callback")
        back = browser.get(back_at + callback.removeprefix(c.public))  # the balancer's choice
        assert back.status_code == 303, back.text
        consent = browser.get(back_at + "/oauth/consent")
        assert consent.status_code == 200
        vault = consent.text.split("<code>", 1)[1].split("</code>", 1)[0]
        return {"vault": vault}


async def test_a_person_gets_one_vault_whichever_replicas_they_sign_in_on(
    pg_url: str, tmp_path: Path
) -> None:
    port = free_port()
    with cluster(
        pg_url,
        tmp_path,
        signin="oidc",
        oidc_issuer=f"http://127.0.0.1:{port}",
        oidc_client_id="memoryrouter",
        oidc_client_secret="a-long-client-secret-for-tests",
    ) as c:
        client = {
            "client_id": "memoryrouter",
            "client_secret": "a-long-client-secret-for-tests",
            "redirect_uris": [c.public + "/oauth/oidc/callback"],
        }
        people = {
            "ada": {"sub": "ada-1", "email": "ada@example.org", "email_verified": True},
            "bob": {"sub": "bob-1", "email": "bob@example.org", "email_verified": True},
        }
        a, b, third = c.bases
        with running_idp([client], people, port=port) as idp:
            first = oidc_sign_in(c, idp, "ada", at=a, back_at=b)
            again = oidc_sign_in(c, idp, "ada", at=third, back_at=a)
            other = oidc_sign_in(c, idp, "bob", at=b, back_at=third)
        assert first["vault"] == again["vault"]  # the same vault, from any replica
        assert other["vault"] != first["vault"]  # another person, another vault
        with psycopg.connect(c.url) as conn:
            bound = conn.execute("SELECT count(*) FROM oauth_identities").fetchone()
        assert bound == (2,)
