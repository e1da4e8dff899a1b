"""The typed REST client: errors map to the error tree; transport failures name their class."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx2
import pytest

from mcp_memoryrouter import schemas
from mcp_memoryrouter.client import MAX_RETRIES, VaultClient
from mcp_memoryrouter.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    LeaseExpired,
    MemoryRouterError,
    NotFound,
    RateLimited,
    TransportFailure,
    Unauthorized,
)
from mcp_memoryrouter.vault.app import in_process
from tests.support import Vault

pytestmark = pytest.mark.anyio


def answering(status: int, body: object) -> httpx2.MockTransport:
    return httpx2.MockTransport(lambda request: httpx2.Response(status, json=body))


@pytest.mark.parametrize(
    ("status", "code", "error"),
    [
        (400, "invalid_request", InvalidRequest),
        (404, "not_found", NotFound),
        (409, "lease_expired", LeaseExpired),
    ],
)
async def test_envelopes_become_the_matching_error(
    status: int, code: str, error: type[Exception]
) -> None:
    body = {"error": {"code": code, "message": "nope", "details": {"field": "x"}}}
    client = VaultClient("http://vault", "mk_x", transport=answering(status, body))
    with pytest.raises(error) as raised:
        await client.stats()
    assert raised.value.details == {"field": "x"}  # type: ignore[attr-defined]
    await client.aclose()


async def test_a_transport_failure_names_the_exception_class() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("")  # some transports stringify to ""

    client = VaultClient("http://vault", "mk_x", transport=httpx2.MockTransport(refuse))
    with pytest.raises(TransportFailure, match="ConnectError"):
        await client.search(schemas.SearchRequest(query="x"))
    await client.aclose()


async def test_requests_carry_the_key_and_the_wire_names() -> None:
    seen: list[httpx2.Request] = []

    def record(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(
            200,
            json={
                "memories": [],
                "returned": {"from": "2026-01-01T00:00:00.000Z", "to": "2026-01-02T00:00:00.000Z"},
                "truncated": False,
                "reflection": {
                    "unconsolidated": {
                        "raw": {"units": 0, "est_tokens": 0, "importance_equiv": 0},
                        "tier2": {"count": 0, "importance": 0, "est_tokens": 0},
                    },
                    "threshold_tokens": 50000,
                    "threshold_importance": 150,
                    "suggestion": None,
                },
            },
        )

    client = VaultClient("http://vault", "mk_abc", transport=httpx2.MockTransport(record))
    page = await client.with_key("mk_other").date_search(
        schemas.DateSearchRequest.model_validate({"from": "2026-01-01"})
    )
    assert page.truncated is False
    assert seen[0].headers["authorization"] == "Bearer mk_other"
    assert seen[0].read() == b'{"from":"2026-01-01","order":"newest_first"}'
    await client.aclose()


class Throttled:
    """Answers 429 with ``Retry-After`` for the first ``times`` requests, then ``then``."""

    def __init__(self, times: int, retry_after: list[str], then: httpx2.Response) -> None:
        self.times = times
        self.retry_after = retry_after
        self.then = then
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if len(self.requests) <= self.times:
            after = self.retry_after[(len(self.requests) - 1) % len(self.retry_after)]
            body = {"error": {"code": "rate_limited", "message": "slow down", "details": {}}}
            return httpx2.Response(429, json=body, headers={"Retry-After": after})
        return self.then


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


async def test_a_429_is_retried_after_its_retry_after_capped_at_30_seconds() -> None:
    body = {"vault": "vr_x", "read_only": False, "mode": "full"}
    server = Throttled(3, ["2", "120", "soon"], httpx2.Response(200, json=body))
    sleeps = Sleeps()
    client = VaultClient(
        "http://vault", "mk_x", transport=httpx2.MockTransport(server), sleep=sleeps
    )
    info = await client.with_key("mk_y").key_info()
    assert info.vault == "vr_x"
    assert sleeps.waits == [2.0, 30.0, 1.0]
    assert len(server.requests) == 4
    assert {r.headers["authorization"] for r in server.requests} == {"Bearer mk_y"}
    await client.aclose()


async def test_a_post_is_sent_again_whole_after_a_429() -> None:
    ok: dict[str, object] = {"memories": [], "reflection": None}
    server = Throttled(1, ["1"], httpx2.Response(500, json=ok))
    client = VaultClient(
        "http://vault", "mk_x", transport=httpx2.MockTransport(server), sleep=Sleeps()
    )
    with pytest.raises(MemoryRouterError):
        await client.search(schemas.SearchRequest(query="postgres"))
    assert [r.read() for r in server.requests] == [b'{"query":"postgres","limit":10}'] * 2
    await client.aclose()


async def test_retries_are_bounded_then_the_429_is_raised() -> None:
    server = Throttled(100, ["1"], httpx2.Response(200, json={}))
    sleeps = Sleeps()
    client = VaultClient(
        "http://vault", "mk_x", transport=httpx2.MockTransport(server), sleep=sleeps
    )
    with pytest.raises(RateLimited):
        await client.stats()
    assert len(sleeps.waits) == MAX_RETRIES == 5
    assert len(server.requests) == MAX_RETRIES + 1
    await client.aclose()


async def test_a_client_with_a_short_longest_wait_rides_out_short_waits_only() -> None:
    """The MCP server's client: a host waits on the tool call, so a long Retry-After is
    raised at once for the model to relay, not slept through."""
    body = {"vault": "vr_x", "read_only": False, "mode": "full"}
    sleeps = Sleeps()
    short = Throttled(1, ["1"], httpx2.Response(200, json=body))
    client = VaultClient(
        "http://vault",
        "mk_x",
        transport=httpx2.MockTransport(short),
        sleep=sleeps,
        longest_wait=2.0,
    )
    assert (await client.with_key("mk_y").key_info()).vault == "vr_x"
    assert sleeps.waits == [1.0]
    long = Throttled(1, ["20"], httpx2.Response(200, json=body))
    client = VaultClient(
        "http://vault",
        "mk_x",
        transport=httpx2.MockTransport(long),
        sleep=sleeps,
        longest_wait=2.0,
    )
    with pytest.raises(RateLimited):
        await client.with_key("mk_y").key_info()
    assert sleeps.waits == [1.0] and len(long.requests) == 1
    await client.aclose()


# --- the vault's timeline and keys --------------------------------------------------------


async def test_timeline_list_keys_and_revoke_key_send_the_documented_requests() -> None:
    seen: list[httpx2.Request] = []
    answers = {
        "/v1/memory/timeline": {
            "vault": "vr_x",
            "bucket": "week",
            "buckets": [{"start": "2026-01-05", "tiers": {"1": 2, "2": 1, "3": 0}}],
        },
        "/v1/keys": {"vault": "vr_x", "keys": []},
    }

    def record(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        path = request.url.path
        return httpx2.Response(200, json=answers.get(path, {"id": path.rsplit("/", 1)[-1]}))

    client = VaultClient("http://vault", "mk_abc", transport=httpx2.MockTransport(record))
    found = await client.timeline("week")
    assert found.buckets[0].start == "2026-01-05" and found.buckets[0].tiers["2"] == 1
    await client.timeline()
    assert (await client.list_keys()).keys == []
    revoked = await client.revoke_key("key_0123")
    assert (revoked.id, revoked.revoked) == ("key_0123", True)
    await client.revoke_key("a/b?c")  # one path segment, whatever it holds
    assert [(r.method, str(r.url)) for r in seen] == [
        ("GET", "http://vault/v1/memory/timeline?bucket=week"),
        ("GET", "http://vault/v1/memory/timeline?bucket=month"),
        ("GET", "http://vault/v1/keys"),
        ("DELETE", "http://vault/v1/keys/key_0123"),
        ("DELETE", "http://vault/v1/keys/a%2Fb%3Fc"),
    ]
    assert {r.headers["authorization"] for r in seen} == {"Bearer mk_abc"}
    await client.aclose()


def _clients(vault: Vault, key: str) -> dict[str, VaultClient]:
    """A client over HTTP, and one with the in-process carrier and HTTP for the calls it does
    not carry (as the embedded server makes it)."""
    transport = httpx2.ASGITransport(app=vault.app)
    return {
        "http": VaultClient("http://vault.internal", key, transport=transport),
        "carrier": VaultClient(
            "http://vault.internal", key, transport=transport, carrier=in_process(vault.app)
        ),
    }


@pytest.mark.parametrize("way", ["http", "carrier"])
async def test_timeline_through_the_client_is_the_vaults_answer(vault: Vault, way: str) -> None:
    for moment in ("2026-01-05T10:00:00Z", "2026-01-11T10:00:00Z", "2026-02-01T10:00:00Z"):
        vault.ingest(f"on {moment}", date=moment)
    client = _clients(vault, vault.key)[way]
    for size in ("day", "week", "month"):
        found = await client.timeline(size)
        direct = vault.http.get(f"/v1/memory/timeline?bucket={size}", headers=vault.headers())
        assert found.model_dump() == direct.json()
    by_month = await client.timeline()
    assert by_month.bucket == "month"
    assert [(b.start, b.tiers) for b in by_month.buckets] == [
        ("2026-01-01", {"1": 2, "2": 0, "3": 0}),
        ("2026-02-01", {"1": 1, "2": 0, "3": 0}),
    ]
    with pytest.raises(InvalidRequest) as refused:
        await client.timeline("year")
    assert refused.value.details == {"field": "bucket"}
    await client.aclose()


@pytest.mark.parametrize("way", ["http", "carrier"])
async def test_list_and_revoke_keys_through_the_client(vault: Vault, way: str) -> None:
    client = _clients(vault, vault.key)[way]
    [first] = (await client.list_keys()).keys
    vault.clock.advance(1)  # listed oldest first
    reader = await client.mint_key(schemas.KeyCreateRequest(name="reader", read_only=True))
    listed = await client.list_keys()
    assert listed.vault == (await client.key_info()).vault
    assert [(k.id, k.read_only) for k in listed.keys] == [(first.id, False), (reader.id, True)]
    assert all(not hasattr(k, "key") for k in listed.keys)  # never a secret
    with pytest.raises(Forbidden):
        await _clients(vault, reader.key)[way].list_keys()
    assert await client.revoke_key(reader.id) == schemas.KeyRevoked(id=reader.id)
    assert [k.id for k in (await client.list_keys()).keys] == [first.id]
    with pytest.raises(Unauthorized):
        await _clients(vault, reader.key)[way].timeline()  # a revoked key is unknown
    with pytest.raises(NotFound):
        await client.revoke_key(reader.id)
    with pytest.raises(Conflict):
        await client.revoke_key(first.id)  # the vault's last read-write key
    await client.aclose()


def exporting(*chunks: bytes) -> httpx2.MockTransport:
    """A vault whose export body arrives in exactly these chunks."""

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return httpx2.MockTransport(lambda request: httpx2.Response(200, content=body()))


async def test_an_export_record_ends_at_a_newline_only_wherever_the_chunks_break() -> None:
    records = [{"content": f"a{sep}b", "session_id": f"s{sep}"} for sep in "\x85\u2028\u2029"]
    records.append({"content": "last, with no newline after it"})
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)[:-1]
    encoded = body.encode("utf-8")
    for size in (1, 2, 7, len(encoded)):  # 1 and 2 cut U+2028's three bytes apart
        pieces = [encoded[i : i + size] for i in range(0, len(encoded), size)]
        client = VaultClient("http://vault", "mk_x", transport=exporting(*pieces))
        assert [line async for line in client.export_lines()] == records
        await client.aclose()


async def test_an_export_line_that_is_not_a_json_object_is_a_transport_failure() -> None:
    for broken in (b'{"content": "cut', b"\xff\xfe", b"[1, 2]"):
        client = VaultClient(
            "http://vault", "mk_x", transport=exporting(b'{"content": "x"}\n\n', broken, b"\n")
        )
        with pytest.raises(TransportFailure):
            _ = [line async for line in client.export_lines()]
        await client.aclose()
