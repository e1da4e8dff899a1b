"""Rate limiting: a token bucket per key, 429 in the envelope with ``Retry-After``."""

from __future__ import annotations

import pytest

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.http.ratelimit import TokenBuckets
from tests.support import FakeClock
from tests.support.api import assert_envelope
from tests.support.vaults import LimitedVault

SEARCH = {"query": "postgres"}
INGEST = {"messages": [{"content": "throttled fact", "date": "2026-02-01"}]}


def search(vault: LimitedVault, key: str | None = None) -> int:
    headers = {"X-Memory-Key": key or vault.key}
    return vault.http.post("/v1/memory/search", json=SEARCH, headers=headers).status_code


def test_a_key_past_its_burst_is_429_with_retry_after(limited: LimitedVault) -> None:
    assert [search(limited) for _ in range(3)] == [200, 200, 200]
    response = limited.http.post(
        "/v1/memory/search", json=SEARCH, headers={"X-Memory-Key": limited.key}
    )
    assert_envelope(response, 429, "rate_limited")
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"]["details"] == {"retry_after": 1}


@pytest.mark.parametrize("limited", [(6, 1)], indirect=True)
def test_retry_after_counts_down_to_the_next_token(limited: LimitedVault) -> None:
    assert search(limited) == 200
    first = limited.http.get("/v1/memory/stats", headers={"X-Memory-Key": limited.key})
    assert first.status_code == 429
    assert first.headers["retry-after"] == "10"  # 6 a minute: one token every 10 s
    limited.clock.advance(9.5)
    later = limited.http.get("/v1/memory/stats", headers={"X-Memory-Key": limited.key})
    assert later.status_code == 429
    assert later.headers["retry-after"] == "1"
    limited.clock.advance(0.5)
    assert search(limited) == 200


def test_each_key_has_its_own_budget(limited: LimitedVault) -> None:
    other, _ = limited.service.create_vault()
    for _ in range(3):
        search(limited)
    assert search(limited) == 429
    assert search(limited, other) == 200
    # a mode suffix is the same key: it shares the budget
    assert search(limited, limited.key + ":read") == 429


def test_every_header_a_key_travels_in_counts_against_it(limited: LimitedVault) -> None:
    headers = [
        {"X-Memory-Key": limited.key},
        {"Authorization": f"Bearer {limited.key}"},
        {"x-api-key": limited.key},
    ]
    for header in headers:
        assert limited.http.post("/v1/memory/search", json=SEARCH, headers=header).status_code
    response = limited.http.post("/v1/memory/search", json=SEARCH, headers=headers[1])
    assert response.status_code == 429


def test_requests_without_a_key_are_limited_by_client_address(limited: LimitedVault) -> None:
    statuses = [limited.http.post("/v1/memory/search", json=SEARCH).status_code for _ in range(4)]
    assert statuses == [401, 401, 401, 429]
    assert search(limited) == 200  # a keyed caller has its own bucket


def test_a_throttled_write_stores_nothing(limited: LimitedVault) -> None:
    for _ in range(3):
        search(limited)
    response = limited.http.post(
        "/v1/memory/ingest", json=INGEST, headers={"X-Memory-Key": limited.key}
    )
    assert_envelope(response, 429, "rate_limited")
    assert limited.memories() == 0


def test_healthz_and_the_key_lookup_are_never_limited(limited: LimitedVault) -> None:
    assert {limited.http.get("/healthz").status_code for _ in range(10)} == {200}
    headers = {"X-Memory-Key": limited.key}
    current = {limited.http.get("/v1/keys/current", headers=headers).status_code for _ in range(10)}
    assert current == {200}
    assert search(limited) == 200  # and the lookups spent nothing


@pytest.mark.parametrize("limited", [(0, None)], indirect=True)
def test_zero_turns_the_limit_off(limited: LimitedVault) -> None:
    assert {search(limited) for _ in range(50)} == {200}


def test_the_default_budget_is_generous_and_bursts_a_minute_of_it() -> None:
    settings = Settings()
    assert settings.rate_limit_per_minute == 600
    assert settings.rate_limit_burst is None  # a minute's worth


def test_a_clock_stepping_back_refills_nothing() -> None:
    clock = FakeClock()
    buckets = TokenBuckets(60, 1, clock)
    assert buckets.take("k") is None
    clock.advance(-30)
    assert buckets.take("k") == pytest.approx(1.0)


def test_a_bucket_never_holds_more_than_its_burst() -> None:
    clock = FakeClock()
    buckets = TokenBuckets(60, 2, clock)
    clock.advance(3600)
    assert buckets.take("k") is None
    assert buckets.take("k") is None
    assert buckets.take("k") is not None


def test_buckets_that_refilled_are_forgotten_once_there_are_many_callers() -> None:
    clock = FakeClock()
    buckets = TokenBuckets(60, 2, clock, max_buckets=3)
    for caller in ("a", "b", "c"):
        buckets.take(caller)
    clock.advance(1)  # a, b and c are full again
    buckets.take("a")
    buckets.take("a")
    buckets.take("d")  # the fourth caller: b and c are forgotten, a (spent) is kept
    assert buckets.take("a") is not None
    assert buckets.take("b") is None
