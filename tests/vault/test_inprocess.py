"""The in-process carrier: the embedded server's tools call the vault's routes without HTTP,
and get exactly what the same call over HTTP gets: answers, refusals, limits, retries."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi.routing import APIRoute

from mcp_memoryrouter import client as client_module
from mcp_memoryrouter import schemas
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.errors import (
    Forbidden,
    MemoryRouterError,
    PayloadTooLarge,
    RateLimited,
    Unauthorized,
)
from mcp_memoryrouter.vault.app import create_vault_app, in_process
from mcp_memoryrouter.vault.http.api import router
from mcp_memoryrouter.vault.http.inprocess import OPERATIONS, Admitted, InProcess
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.support import FakeClock

pytestmark = pytest.mark.anyio
MAX_BODY = 4096


@dataclass
class Vault:
    service: VaultService
    key: str
    read_only_key: str
    clients: dict[str, Callable[..., VaultClient]]
    rate_ms: list[int]
    carrier: InProcess


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[Vault]:
    store = SQLiteStore(tmp_path / "vault.db")
    service = VaultService(store, clock=FakeClock(), lease_seconds=900)
    key, _ = service.create_vault()
    read_only = service.mint_key(service.authenticate(key), "reader", True)[0]
    rate_ms = [0]
    settings = Settings(
        data_dir=tmp_path, max_body_bytes=MAX_BODY, rate_limit_per_minute=60, rate_limit_burst=3
    )
    app = create_vault_app(settings, service=service, rate_clock=lambda: rate_ms[0])
    carrier = in_process(app)

    def over_http(key: str | None, **options: Any) -> VaultClient:
        return VaultClient(
            "http://vault.internal",
            key,
            transport=httpx2.ASGITransport(app=app, raise_app_exceptions=False),
            **options,
        )

    def in_proc(key: str | None, **options: Any) -> VaultClient:
        return VaultClient("http://vault.internal", key, carrier=carrier, **options)

    clients = {"http": over_http, "in-process": in_proc}
    yield Vault(service, key, read_only, clients, rate_ms, carrier)
    store.close()


def test_every_call_the_client_makes_without_streaming_is_carried(vault: Vault) -> None:
    """Every call to a fixed path; a path parameter or a query string goes over HTTP."""
    import inspect

    source = inspect.getsource(client_module.VaultClient)
    calls = re.findall(r'_call\(\s*"(\w+)",\s*"([^"]+)"', source)
    assert len(calls) == 20
    carrier = vault.carrier
    assert [c for c in calls if not carrier.offers(*c)] == []
    assert not carrier.offers("DELETE", "/v1/keys/key_0123456789abcdef")
    assert carrier.offers("GET", "/v1/memory/timeline")
    assert not carrier.offers("GET", "/v1/memory/timeline?bucket=day")


def test_the_carriers_table_is_every_route_but_the_streamed_one_and_path_parameters() -> None:
    """Its explicit table (no route found by its signature) names the router's routes."""
    routes = {
        (method, route.path)
        for route in router.routes
        if isinstance(route, APIRoute)
        for method in route.methods or ()
        if "{" not in route.path and route.path != "/v1/memory/export"
    }
    assert set(OPERATIONS) == routes


async def both(
    vault: Vault, act: Callable[[VaultClient], Awaitable[Any]], key: str | None
) -> list[Any]:
    """What ``act`` gets over HTTP and in process: its answer, or its error's type, message
    and details."""
    seen = []
    for make in vault.clients.values():
        vault.rate_ms[0] += 60_000  # a full bucket for each way
        try:
            seen.append(await act(make(key)))
        except MemoryRouterError as error:
            seen.append((type(error), error.message, error.details))
    return seen


async def test_answers_are_the_same_either_way(vault: Vault) -> None:
    await vault.clients["http"](vault.key).ingest(
        schemas.IngestRequest(messages=[schemas.MessageIn(content="the cat sat on the mat")])
    )
    query = schemas.SearchRequest(query="cat")
    for act in (
        lambda c: c.search(query),
        lambda c: c.stats(),
        lambda c: c.key_info(),
        lambda c: c.health(),
        lambda c: c.usage(),
    ):
        over_http, in_proc = await both(vault, act, vault.key)
        assert in_proc == over_http


@pytest.mark.parametrize(
    ("who", "error"),
    [("unknown", Unauthorized), ("none", Unauthorized), ("read_only", Forbidden)],
)
async def test_refusals_are_the_same_either_way(
    vault: Vault, who: str, error: type[MemoryRouterError]
) -> None:
    key = {"unknown": "mk_" + "0" * 64, "none": None, "read_only": vault.read_only_key}[who]
    write = schemas.IngestRequest(messages=[schemas.MessageIn(content="hello")])
    over_http, in_proc = await both(vault, lambda c: c.ingest(write), key)
    assert in_proc == over_http
    assert in_proc[0] is error


async def test_the_body_limit_is_the_same_byte_for_byte(vault: Vault) -> None:
    def ingest(size: int) -> Callable[[VaultClient], Awaitable[Any]]:
        content = "é" * size  # two bytes each: the limit is on encoded bytes
        body = schemas.IngestRequest(messages=[schemas.MessageIn(content=content)])
        return lambda c: c.ingest(body)

    one = schemas.IngestRequest(messages=[schemas.MessageIn(content="x")])
    payload = one.model_dump(mode="json", by_alias=True, exclude_none=True)
    envelope = len(httpx2.Request("POST", "http://vault", json=payload).content) - 1
    fits = (MAX_BODY - envelope) // 2
    over_http, in_proc = await both(vault, ingest(fits + 1), vault.key)
    assert in_proc == over_http
    assert in_proc[0] is PayloadTooLarge and in_proc[2] == {"max_bytes": MAX_BODY}
    over_http, in_proc = await both(vault, ingest(fits), vault.key)
    assert isinstance(over_http, schemas.IngestResponse) and isinstance(
        in_proc, schemas.IngestResponse
    )


async def test_the_rate_limit_is_the_same_bucket_and_the_same_429(vault: Vault) -> None:
    for name, make in vault.clients.items():
        vault.rate_ms[0] += 60_000
        client = make(vault.key, longest_wait=0.5)  # a 1 s wait is not ridden out
        for _ in range(3):
            await client.stats()
        with pytest.raises(RateLimited) as refused:
            await client.stats()
        assert refused.value.details == {"retry_after": 1}, name
        await client.key_info()  # never throttled: it is how /mcp authenticates


async def test_a_429_is_waited_out_the_same_way(vault: Vault) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        vault.rate_ms[0] += int(seconds * 1000)

    client = vault.clients["in-process"](vault.key, sleep=sleep)
    vault.rate_ms[0] += 60_000
    for _ in range(4):
        await client.stats()
    assert waits == [1.0]
    other = vault.clients["in-process"](vault.read_only_key, sleep=sleep)
    await other.stats()  # a key of its own has a bucket of its own
    assert waits == [1.0]


async def test_an_unexpected_failure_is_logged_by_type_and_answered_the_same(
    vault: Vault, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("secret text from a caller")

    monkeypatch.setattr(vault.service, "stats", broken)
    with caplog.at_level(logging.ERROR, logger="mcp_memoryrouter.vault"):
        over_http, in_proc = await both(vault, lambda c: c.stats(), vault.key)
    assert in_proc == over_http == (MemoryRouterError, "internal error", {})
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["unhandled RuntimeError on GET /v1/memory/stats"] * 2


async def test_an_admission_stands_for_its_request_and_the_limits_still_apply(
    vault: Vault,
) -> None:
    """What /mcp's token check admitted is what the same request's tool calls act with: the
    key is not looked up again (a revocation in between is seen by the next request), while
    each call still takes its rate-limit token and has its body measured."""
    client = vault.clients["in-process"](vault.key, longest_wait=0.5)
    vault.rate_ms[0] += 60_000  # three tokens
    info, admitted = await client.admitted()
    assert info == await client.key_info()  # neither takes a token
    listed = await client.list_keys()
    own = next(k.id for k in listed.keys if k.name != "reader")
    minted = await client.mint_key(schemas.KeyCreateRequest(name="second"))
    await vault.clients["http"](minted.key).revoke_key(own)
    await admitted.stats()  # the request admitted before the revocation goes on
    vault.rate_ms[0] += 60_000
    with pytest.raises(Unauthorized):
        await client.stats()  # the next request is refused
    with pytest.raises(Unauthorized):
        await client.admitted()
    await admitted.stats()
    await admitted.stats()
    with pytest.raises(RateLimited):
        await admitted.stats()
    vault.rate_ms[0] += 60_000
    big = schemas.IngestRequest(messages=[schemas.MessageIn(content="x" * MAX_BODY)])
    with pytest.raises(PayloadTooLarge):
        await admitted.ingest(big)


async def test_an_admission_is_taken_for_its_own_key_alone(vault: Vault) -> None:
    admitted = Admitted(vault.key, vault.service.authenticate(vault.key))
    unknown = "mk_" + "0" * 64
    for key in (unknown, None):
        with pytest.raises(Unauthorized):
            await vault.carrier.call(
                "GET", "/v1/memory/stats", key, None, schemas.StatsResponse, admitted
            )
    await vault.carrier.call(
        "GET", "/v1/memory/stats", vault.key, None, schemas.StatsResponse, admitted
    )


async def test_over_http_an_admission_is_the_key_sent_again(vault: Vault) -> None:
    client = vault.clients["http"](vault.key)
    info, admitted = await client.admitted()
    assert admitted is client and info == await client.key_info()
