"""/metrics over a real uvicorn on loopback: requests counted and timed by route template (an
id in a path never becomes a label, a path no route serves is ``other``), the embedding
queue and the reflection debt read from the store at scrape time, the access rule (a token;
with MEMORYROUTER_METRICS_OPEN=loopback, clients on this machine no proxy relayed; else
nobody), and the exposition parsed line by line."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from starlette.types import Message, Receive, Scope, Send

from mcp_memoryrouter.app import Server, create_server
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.metrics import (
    DURATION_BUCKETS,
    OPEN_SETTING,
    TOKEN_SETTING,
    Metrics,
    Requests,
    refusal,
    token_digest,
)
from mcp_memoryrouter.vault.rules.access import Access
from mcp_memoryrouter.vault.rules.debt import RAW_DUE_TOKENS, due, suggestion
from mcp_memoryrouter.vault.rules.domain import Backlog, Counters, Entry
from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.service import IncomingMessage, VaultService
from tests import pg
from tests.support import T0, FakeClock, StoreFactory, free_port, live_server
from tests.vault.embedders import ConceptEmbedder

MEMORY_ID = "0b1e2a4c-5d6f-4a8b-9c0d-1e2f3a4b5c6d"
KEY_ID = "key_0123456789abcdef"
TOKEN = "s3cret-scrape-token-for-the-test"


# --- a tiny parser of the text exposition format (0.0.4) -----------------------------------

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(rf"^({NAME})(?:\{{(.*)\}})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


def parse(text: str) -> list[Sample]:
    """Every sample; fails on a line the format does not allow, a sample of a family without
    a TYPE, or a histogram whose buckets do not add up."""
    assert text.endswith("\n")
    types: dict[str, str] = {}
    samples: list[Sample] = []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            assert re.match(rf"^# HELP {NAME} \S", line), line
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert re.fullmatch(NAME, name) and kind in TYPES and name not in types, line
            types[name] = kind
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample: {line!r}"
        name, raw_labels, raw_value = match.groups()
        labels: dict[str, str] = {}
        position = 0
        while raw_labels and position < len(raw_labels):
            label = LABEL.match(raw_labels, position)
            assert label, f"bad labels: {line!r}"
            labels[label[1]] = re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], label[2])
            position = label.end()
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        declared = types.get(name) or types.get(family)
        assert declared, f"no TYPE before {name}"
        if declared == "histogram":
            assert name != family, f"a bare histogram sample: {line!r}"
        samples.append(Sample(name, labels, float(raw_value)))
    check_histograms(samples, [name for name, kind in types.items() if kind == "histogram"])
    return samples


def check_histograms(samples: list[Sample], names: list[str]) -> None:
    for name in names:
        buckets: dict[tuple[tuple[str, str], ...], list[tuple[float, float]]] = {}
        for s in samples:
            if s.name == name + "_bucket":
                series = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
                buckets.setdefault(series, []).append((float(s.labels["le"]), s.value))
        for series, rows in buckets.items():
            counts = [count for _, count in rows]
            assert [le for le, _ in rows] == [*DURATION_BUCKETS, float("inf")]
            assert counts == sorted(counts), f"buckets not cumulative: {series}"
            assert counts[-1] == value(samples, name + "_count", **dict(series))


def value(samples: list[Sample], name: str, **labels: str) -> float:
    found = [s.value for s in samples if s.name == name and s.labels == labels]
    assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
    return found[0]


def names(samples: list[Sample]) -> set[str]:
    return {s.name for s in samples}


def requests_of(samples: list[Sample]) -> dict[tuple[str, str, str], float]:
    return {
        (s.labels["route"], s.labels["method"], s.labels["status"]): s.value
        for s in samples
        if s.name == "memoryrouter_http_requests_total"
    }


# --- a server on loopback -------------------------------------------------------------------


@dataclass
class Served:
    base: str
    server: Server
    key: str

    def scrape(self, **headers: str) -> list[Sample]:
        response = httpx2.get(self.base + "/metrics", headers=headers)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        return parse(response.text)

    def auth(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.key}"}

    def ingest(self, texts: list[str], key: str | None = None) -> None:
        body = {"messages": [{"content": t, "date": "2026-02-01T10:00:00Z"} for t in texts]}
        response = httpx2.post(self.base + "/v1/memory/ingest", json=body, headers=self.auth(key))
        assert response.status_code == 202, response.text

    def stats(self, key: str | None = None) -> dict[str, Any]:
        response = httpx2.get(self.base + "/v1/memory/stats", headers=self.auth(key))
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def new_key(self) -> str:
        assert self.server.service is not None
        key, _ = self.server.service.create_vault()
        return key


@contextmanager
def served(data_dir: Path, **settings: Any) -> Iterator[Served]:
    """A server on loopback; its /metrics open to this machine unless ``settings`` say."""
    settings.setdefault("embeddings", "none")
    settings.setdefault("metrics_open", "loopback")
    server = create_server(Settings(data_dir=data_dir, **settings))
    key = ""
    if server.service is not None:
        key, _ = server.service.create_vault()
    with live_server(server.app, lifespan="on") as base:
        yield Served(base, server, key)


# --- requests by route template -------------------------------------------------------------


def test_requests_are_counted_by_route_template_and_junk_paths_as_other(tmp_path: Path) -> None:
    with served(tmp_path, rate_limit_per_minute=3) as s:
        assert httpx2.get(s.base + "/healthz").status_code == 200
        s.stats()
        search = httpx2.post(s.base + "/v1/memory/search", json={"query": "tea"}, headers=s.auth())
        assert search.status_code == 200
        gone = httpx2.delete(s.base + f"/v1/keys/{KEY_ID}", headers=s.auth())
        # the key's fourth request a minute: refused by the rate limit, before any routing
        assert httpx2.get(s.base + "/v1/memory/stats", headers=s.auth()).status_code == 429
        page = httpx2.get(s.base + f"/ui/memories/{MEMORY_ID}")
        mcp = httpx2.post(s.base + "/mcp", json={})
        assert mcp.status_code == 401
        assert httpx2.get(s.base + f"/no/such/{MEMORY_ID}").status_code == 404
        assert httpx2.get(s.base + "/v1/memory/search/").status_code in (307, 404, 405)
        text = httpx2.get(s.base + "/metrics").text
        samples = parse(text)
        again = s.scrape()

    counted = requests_of(samples)
    assert counted[("/healthz", "GET", "200")] == 1
    assert counted[("/v1/memory/stats", "GET", "200")] == 1
    assert counted[("/v1/memory/stats", "GET", "429")] == 1
    assert counted[("/v1/memory/search", "POST", "200")] == 1
    assert counted[("/v1/keys/{key_id}", "DELETE", str(gone.status_code))] == 1
    assert counted[("/ui/memories/{memory_id}", "GET", str(page.status_code))] == 1
    assert counted[("/mcp", "POST", "401")] == 1
    assert counted[("other", "GET", "404")] >= 1
    # an id in a path never becomes a label, and every route label is a template or other
    assert MEMORY_ID not in text and KEY_ID not in text
    assert isinstance(s.server.app, Metrics)
    assert {route for route, _, _ in counted} <= s.server.app.route_labels
    # the histogram counts the same requests as the counter
    for route, method in {(r, m) for r, m, _ in counted}:
        total = sum(n for (r, m, _), n in counted.items() if (r, m) == (route, method))
        count = value(
            samples, "memoryrouter_http_request_duration_seconds_count", route=route, method=method
        )
        assert count == total
    # the scrape is counted too, from the next one on
    assert requests_of(again)[("/metrics", "GET", "200")] == 1
    info = [x for x in samples if x.name == "memoryrouter_build_info"]
    assert [(x.labels["store"], x.value) for x in info] == [("sqlite", 1.0)]
    assert value(samples, "memoryrouter_uptime_seconds") >= 0


def test_a_streamed_response_is_timed_until_its_last_chunk_not_its_background_work() -> None:
    async def streaming(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"a", "more_body": True})
        await asyncio.sleep(0.2)
        await send({"type": "http.response.body", "body": b"b", "more_body": False})
        await asyncio.sleep(0.5)  # a background task of the app, after the response ended

    async def failing(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("before any response")

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        pass

    metrics = Metrics(streaming, routes=[], store="sqlite", backlog=None, token=None)
    scope = {"type": "http", "method": "GET", "path": "/stream", "headers": []}
    asyncio.run(metrics(scope, receive, send))
    (series,) = metrics.requests.series.values()
    assert series.statuses == {200: 1}
    assert 0.2 <= series.total < 0.5
    metrics.app = failing
    with pytest.raises(RuntimeError):
        asyncio.run(metrics(scope, receive, send))
    assert series.statuses == {200: 1, 500: 1}  # no response sent: counted as the 500 it is


# --- the store at scrape time --------------------------------------------------------------


def test_queue_depth_is_every_vaults_pending_embeddings(tmp_path: Path) -> None:
    # an embedding service nobody listens at: every row stays queued
    nowhere = f"http://127.0.0.1:{free_port()}"
    with served(tmp_path, embeddings="openai", openai_base_url=nowhere) as s:
        other = s.new_key()
        s.ingest([f"Entry {n} in the travel log." for n in range(20)])  # left to the worker
        s.ingest(["Ana prefers tea.", "The cat sleeps."], key=other)  # its embedding failed
        pending = s.stats()["pending_embeddings"] + s.stats(other)["pending_embeddings"]
        samples = s.scrape()
    assert pending == 22
    assert value(samples, "memoryrouter_embedding_queue_depth") == pending
    assert value(samples, "memoryrouter_vaults") == 2
    assert value(samples, "memoryrouter_store_up") == 1


def test_the_debt_aggregate_moves_when_a_vault_crosses_the_threshold(tmp_path: Path) -> None:
    def notes(first: int, count: int) -> list[str]:  # one raw memory of ~400 tokens each
        return [f"Note {n}: " + "the garden needs water " * 68 for n in range(first, first + count)]

    with served(tmp_path) as s:
        other = s.new_key()
        s.ingest(notes(0, 5), key=other)
        s.ingest(notes(0, 110))
        below = s.scrape()
        raw_below = s.stats()["reflection"]["unconsolidated"]["raw"]["est_tokens"]
        other_raw = s.stats(other)["reflection"]["unconsolidated"]["raw"]["est_tokens"]
        assert s.stats()["reflection"]["suggestion"] is None
        s.ingest(notes(110, 20))
        above = s.scrape()
        raw_above = s.stats()["reflection"]["unconsolidated"]["raw"]["est_tokens"]
        assert s.stats()["reflection"]["suggestion"] is not None
    assert raw_below < RAW_DUE_TOKENS <= raw_above
    assert value(below, "memoryrouter_vaults_consolidation_due") == 0
    assert value(above, "memoryrouter_vaults_consolidation_due") == 1
    assert value(below, "memoryrouter_unconsolidated_raw_tokens") == raw_below + other_raw
    assert value(above, "memoryrouter_unconsolidated_raw_tokens") == raw_above + other_raw
    assert value(above, "memoryrouter_unconsolidated_tier2_importance") == 0


@pytest.fixture(params=pg.BACKENDS if pg.available() else ["sqlite"])
def store_backend(request: pytest.FixtureRequest) -> str:
    """The store read runs on SQLite, and on PostgreSQL when a server can be had."""
    backend: str = request.param
    return backend


def test_the_store_read_sums_what_each_vault_reports(
    tmp_path: Path, new_store: StoreFactory
) -> None:
    store = new_store(tmp_path)
    embedders = Embedders({"concepts": ConceptEmbedder}, "concepts")
    service = VaultService(store, clock=FakeClock(), lease_seconds=900, embedders=embedders)
    vaults = [service.authenticate(service.create_vault()[0]) for _ in range(3)]
    assert service.backlog() == Backlog(3, 0, 0, 0, 0)

    def say(access: Access, *texts: str) -> list[str]:
        messages = [IncomingMessage("user", t, None) for t in texts]
        return service.ingest(access, messages, None).ids

    ids = say(vaults[0], *(f"note {n} " + "the garden needs water " * 68 for n in range(140)))
    say(vaults[1], "my car broke down", "lunch with a physician")
    reflections = [Entry(f"Reflection {n} on the weeks in the garden.", 10) for n in range(16)]
    service.import_reflections(vaults[2], 2, reflections, [], (T0, T0 + 86_400_000))
    service.delete_ids(vaults[0], ids[:3])  # what is deleted leaves the queue too

    backlog = service.backlog()
    debts = [service.debt(access) for access in vaults]
    assert backlog.vaults == 3
    assert backlog.pending_embeddings == sum(service.pending_embeddings(a) for a in vaults) > 0
    assert backlog.raw_tokens == sum(d.raw_tokens for d in debts)
    assert backlog.tier2_importance == sum(d.t2_importance for d in debts) == 160
    # the first by its raw tokens, the third by its reflections' importance
    assert [suggestion(d) is not None for d in debts] == [True, False, True]
    assert backlog.consolidation_due == 2
    service.close()


@pytest.mark.parametrize("raw", [0, RAW_DUE_TOKENS - 1, RAW_DUE_TOKENS, RAW_DUE_TOKENS * 3])
@pytest.mark.parametrize("tier2", [0, 149, 150, 400])
def test_a_vault_is_due_exactly_when_its_debt_carries_a_suggestion(raw: int, tier2: int) -> None:
    counters = Counters(raw_units=1, raw_tokens=raw, t2_count=1, t2_importance=tier2)
    assert due(counters) == (suggestion(counters) is not None)


def test_a_store_that_does_not_answer_is_a_gauge_not_a_failed_scrape() -> None:
    def broken() -> Backlog:
        raise OSError("the database went away")

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("not reached")

    metrics = Metrics(app, routes=[], store="postgresql", backlog=broken, token=None)
    samples = parse(asyncio.run(metrics.exposition()))
    assert value(samples, "memoryrouter_store_up") == 0
    assert "memoryrouter_vaults" not in names(samples)


def test_a_server_proxying_to_a_remote_vault_has_request_metrics_and_no_store_gauges(
    tmp_path: Path,
) -> None:
    with served(tmp_path, api_url="http://127.0.0.1:9") as s:
        assert s.server.service is None
        assert httpx2.post(s.base + "/mcp", json={}).status_code == 401
        samples = s.scrape()
    assert requests_of(samples)[("/mcp", "POST", "401")] == 1
    info = [x for x in samples if x.name == "memoryrouter_build_info"]
    assert [x.labels["store"] for x in info] == ["remote"]
    store_gauges = {"memoryrouter_store_up", "memoryrouter_vaults", "memoryrouter_vaults_"}
    assert not {n for n in names(samples) if n.startswith(tuple(store_gauges))}
    assert "memoryrouter_embedding_queue_depth" not in names(samples)


# --- who may scrape -------------------------------------------------------------------------


def test_with_a_token_a_scrape_needs_it(tmp_path: Path) -> None:
    with served(tmp_path, metrics_token=TOKEN, metrics_open=None) as s:
        missing = httpx2.get(s.base + "/metrics")
        wrong = httpx2.get(s.base + "/metrics", headers={"Authorization": "Bearer nope"})
        assert s.scrape(Authorization=f"Bearer {TOKEN}")
        # the token is enough from anywhere, a proxy's relay included
        relayed = {"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": "203.0.113.9"}
        assert httpx2.get(s.base + "/metrics", headers=relayed).status_code == 200
    for refused in (missing, wrong):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert TOKEN_SETTING in refused.text and TOKEN not in refused.text


def test_without_a_token_or_the_loopback_setting_metrics_answers_nobody(tmp_path: Path) -> None:
    with served(tmp_path, metrics_open=None) as s:
        local = httpx2.get(s.base + "/metrics")
    assert local.status_code == 403
    assert TOKEN_SETTING in local.text and f"{OPEN_SETTING}=loopback" in local.text


def test_with_the_loopback_setting_only_a_client_no_proxy_relayed_may_scrape(
    tmp_path: Path,
) -> None:
    with served(tmp_path) as s:
        assert s.scrape()
        relayed = httpx2.get(s.base + "/metrics", headers={"X-Forwarded-For": "203.0.113.9"})
        named = httpx2.get(s.base + "/metrics", headers={"Host": "memory.example.com"})
        via = httpx2.get(s.base + "/metrics", headers={"Via": "1.1 edge"})
        plain_proxy = http10(s.base, "/metrics")
    for refused in (relayed, named, via):
        assert refused.status_code == 403
        assert TOKEN_SETTING in refused.text
    assert plain_proxy.startswith(b"HTTP/1.1 403 ")


def http10(base: str, path: str) -> bytes:
    """What nginx's bare ``proxy_pass`` sends upstream: HTTP/1.0, the upstream's own address
    in Host, no forwarding header, ``Connection: close``; the whole answer."""
    authority = base.removeprefix("http://")
    host, port = authority.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            f"GET {path} HTTP/1.0\r\nHost: {authority}\r\nConnection: close\r\n\r\n".encode()
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def scope_of(client: str | None, *headers: tuple[str, str], version: str = "1.1") -> Scope:
    return {
        "type": "http",
        "http_version": version,
        "method": "GET",
        "path": "/metrics",
        "client": None if client is None else (client, 40_000),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
    }


@pytest.mark.parametrize(
    ("client", "headers", "allowed"),
    [
        ("127.0.0.1", [("host", "127.0.0.1:8787")], True),
        ("127.0.0.1", [("host", "localhost:8787")], True),
        ("::1", [("host", "[::1]:8787")], True),
        ("::ffff:127.0.0.1", [("host", "localhost")], True),
        ("127.0.0.1", [], False),  # no Host: HTTP/1.0, a proxy's way
        ("203.0.113.7", [("host", "127.0.0.1:8787")], False),
        ("10.0.0.2", [("host", "10.0.0.1:8787")], False),
        ("192.168.1.20", [], False),
        (None, [("host", "localhost")], False),  # a Unix socket: anyone may be behind it
        ("127.0.0.1", [("host", "localhost"), ("forwarded", "for=203.0.113.7")], False),
        ("127.0.0.1", [("host", "localhost"), ("x-real-ip", "203.0.113.7")], False),
        ("127.0.0.1", [("host", "memory.example.com")], False),  # a page rebinding a name
        ("127.0.0.1", [("host", "localhost"), ("via", "1.1 tunnel")], False),
        ("127.0.0.1", [("host", "localhost"), ("x-forwarded-proto", "https")], False),
    ],
)
def test_the_loopback_rule(
    client: str | None, headers: list[tuple[str, str]], allowed: bool
) -> None:
    refused = refusal(scope_of(client, *headers), None, loopback=True)
    if allowed:
        assert refused is None
    else:
        assert refused is not None and refused[0] == 403 and TOKEN_SETTING in refused[1]
    # without the setting, nobody: whatever the request
    closed = refusal(scope_of(client, *headers), None)
    assert closed is not None and closed[0] == 403 and OPEN_SETTING in closed[1]


def test_with_a_token_and_the_loopback_setting_either_one_opens_it() -> None:
    token = token_digest(TOKEN)
    local = scope_of("127.0.0.1", ("host", "localhost:8787"))
    assert refusal(local, token, loopback=True) is None
    carrying = scope_of("203.0.113.7", ("authorization", f"Bearer {TOKEN}"))
    assert refusal(carrying, token, loopback=True) is None
    relayed = scope_of("127.0.0.1", ("host", "localhost"), ("x-forwarded-for", "203.0.113.7"))
    refused = refusal(relayed, token, loopback=True)
    assert refused is not None and refused[0] == 401


def test_http_1_0_from_loopback_naming_loopback_is_a_plain_proxy_not_a_local_scraper() -> None:
    """nginx with only ``proxy_pass http://127.0.0.1:8787`` sends exactly this."""
    plain = scope_of("127.0.0.1", ("host", "127.0.0.1:8787"), ("connection", "close"))
    assert refusal(plain, None, loopback=True) is None
    relayed = scope_of("127.0.0.1", ("host", "127.0.0.1:8787"), version="1.0")
    refused = refusal(relayed, None, loopback=True)
    assert refused is not None and refused[0] == 403


@pytest.mark.parametrize(
    ("authorization", "allowed"),
    [
        ([f"Bearer {TOKEN}"], True),
        ([f"bearer {TOKEN}"], True),
        ([], False),
        ([f"Basic {TOKEN}"], False),
        ([f"Bearer {TOKEN}x"], False),
        ([f"Bearer {TOKEN[:-1]}"], False),
        ([f"Bearer {TOKEN}", f"Bearer {TOKEN}"], False),  # one credential, not two
    ],
)
def test_the_token_rule_from_any_address(authorization: list[str], allowed: bool) -> None:
    scope = scope_of("203.0.113.7", *(("authorization", a) for a in authorization))
    refused = refusal(scope, token_digest(TOKEN))
    assert (refused is None) == allowed
    if not allowed:
        assert refused is not None and refused[0] == 401


def test_metrics_off_removes_the_endpoint(tmp_path: Path) -> None:
    with served(tmp_path, metrics="off") as s:
        response = httpx2.get(s.base + "/metrics")
        assert httpx2.get(s.base + "/healthz").status_code == 200
    assert response.status_code == 404
    assert not isinstance(s.server.app, Metrics)


def test_only_get_reads_the_metrics(tmp_path: Path) -> None:
    with served(tmp_path) as s:
        response = httpx2.post(s.base + "/metrics")
    assert response.status_code == 405 and response.headers["allow"] == "GET"


def test_label_values_are_escaped_as_the_format_says() -> None:
    requests = Requests()
    odd = 'a "quoted" back\\slash\nand a newline'
    requests.observe(odd, "GET", 200, 0.003)
    out: list[str] = []
    requests.render(out)
    (sample,) = [s for s in parse("\n".join(out) + "\n") if s.name.endswith("_total")]
    assert sample.labels == {"route": odd, "method": "GET", "status": "200"}
    assert sample.value == 1
