"""The typed REST client: errors map to the error tree; transport failures name their class."""

from __future__ import annotations

import httpx2
import pytest

from mcp_memoryrouter import schemas
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import InvalidRequest, LeaseExpired, NotFound, TransportFailure

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
