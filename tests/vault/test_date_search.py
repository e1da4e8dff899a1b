"""Date search: window rules, filters, and exact-once cursorless paging."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_memoryrouter.vault.rules.access import Access
from mcp_memoryrouter.vault.rules.dates import format_ms, parse_moment
from mcp_memoryrouter.vault.rules.domain import Batch, Entry, SearchFilter
from mcp_memoryrouter.vault.rules.window import Order
from mcp_memoryrouter.vault.service import IncomingMessage, VaultService
from mcp_memoryrouter.vault.store.postgres import PostgresStore
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests import pg
from tests.support import FakeClock, Vault
from tests.support.api import assert_envelope, checkout, commit

DATE_SEARCH = "/v1/memory/date-search"
DAY = 86_400_000
BASE = 1_769_904_000_000  # 2026-02-01


def search(vault: Vault, **body: Any) -> dict[str, Any]:
    response = vault.post(DATE_SEARCH, body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_date_only_bounds_cover_whole_utc_days(vault: Vault) -> None:
    vault.ingest("before", date="2026-01-31T23:59:59.999Z")
    vault.ingest("first instant", date="2026-02-01T00:00:00Z")
    vault.ingest("last instant", date="2026-02-02T23:59:59.999Z")
    vault.ingest("after", date="2026-02-03T00:00:00Z")
    body = search(vault, **{"from": "2026-02-01", "to": "2026-02-02"})
    assert [m["content"] for m in body["memories"]] == ["last instant", "first instant"]
    assert body["returned"] == {
        "from": "2026-02-01T00:00:00.000Z",
        "to": "2026-02-02T23:59:59.999Z",
    }
    assert body["truncated"] is False
    assert set(body) == {"memories", "returned", "truncated", "reflection"}


def test_to_defaults_to_now_and_order_can_be_oldest_first(vault: Vault) -> None:
    vault.ingest("past", date="2025-12-01")
    vault.ingest("future", date="2027-01-01")
    body = search(vault, **{"from": "2025-01-01", "order": "oldest_first"})
    assert [m["content"] for m in body["memories"]] == ["past"]
    assert body["returned"]["to"] == format_ms(vault.clock.now_ms)


def test_reflections_match_on_their_coverage_window(vault: Vault) -> None:
    vault.ingest("early february", date="2026-02-02")
    vault.ingest("late february", date="2026-02-27")
    created = commit(
        vault, checkout(vault)["batch_id"], [{"text": "February in review.", "importance": 8}]
    ).json()["created"]
    vault.clock.advance(90 * 86400)  # the reflection is written much later
    body = search(vault, **{"from": "2026-02-10", "to": "2026-02-12", "tiers": [2]})
    assert [m["id"] for m in body["memories"]] == [created[0]["id"]]
    row = body["memories"][0]
    assert row["tier"] == 2 and row["importance"] == 8
    assert row["covers"] == {"from": "2026-02-02T00:00:00.000Z", "to": "2026-02-27T00:00:00.000Z"}
    assert search(vault, **{"from": "2026-03-01", "to": "2026-03-31"})["memories"] == []


def test_importance_filter_excludes_raw_rows(vault: Vault) -> None:
    vault.ingest("raw moment", date="2026-02-02")
    commit(
        vault,
        checkout(vault)["batch_id"],
        [{"text": "Minor point.", "importance": 3}, {"text": "Key decision.", "importance": 9}],
    )
    body = search(vault, **{"from": "2026-02-01", "to": "2026-02-28", "importance": 8})
    assert [m["content"] for m in body["memories"]] == ["Key decision."]


def test_a_query_ranks_by_relevance_within_the_window(vault: Vault) -> None:
    vault.ingest("deploy of the api", date="2026-02-03")
    vault.ingest("deploy deploy of the api again", date="2026-02-04")
    vault.ingest("deploy outside the window", date="2026-03-04")
    vault.ingest("lunch", date="2026-02-05")
    body = search(vault, **{"from": "2026-02-01", "to": "2026-02-28", "query": "deploy"})
    assert [m["content"] for m in body["memories"]] == [
        "deploy deploy of the api again",
        "deploy of the api",
    ]
    assert all("score" in m for m in body["memories"])


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"from": "soon"},
        {"from": " 2026-02-01"},
        {"from": "2026-02-01T10:00:00+0100"},
        {"from": "2026-02-29"},
        {"from": "0001-01-01T00:00:00+01:00"},
        {"from": "2026-02-01", "to": "9999-12-31T20:00:00-05:00"},
        {"from": "2026-02-01", "tiers": []},
        {"from": "2026-02-01", "tiers": [4]},
        {"from": "2026-02-01", "importance": 0},
        {"from": "2026-02-01", "importance": 7.5},
        {"from": "2026-02-01", "order": "random"},
        {"from": "2026-02-01", "max_tokens": "lots"},
    ],
)
def test_invalid_date_searches_are_400(vault: Vault, body: dict[str, Any]) -> None:
    assert_envelope(vault.post(DATE_SEARCH, body), 400, "invalid_request")


@pytest.mark.parametrize(
    "window",
    [{"from": "2026-02-02", "to": "2026-02-01"}, {"from": "9999-12-31", "query": "deploy"}],
)
def test_a_window_that_closes_before_it_opens_is_an_empty_page(
    vault: Vault, window: dict[str, str]
) -> None:
    # JSON Schema cannot compare from with to (or now), so /openapi.json allows it: no 400
    vault.ingest("deploy finished", date="2026-02-01T12:00:00Z")
    body = search(vault, **window)
    assert (body["memories"], body["truncated"]) == ([], False)
    assert body["returned"]["from"] == format_ms(parse_moment(window["from"], field="from"))


def test_a_group_larger_than_the_budget_still_advances(vault: Vault) -> None:
    vault.ingest(*[f"{'z' * 1600} {i}" for i in range(6)], date="2026-02-02")  # 6 x ~400 tokens
    vault.ingest("older", date="2026-02-01")
    first = search(vault, **{"from": "2026-02-01", "to": "2026-02-28", "max_tokens": 1000})
    assert len(first["memories"]) == 6 and first["truncated"] is True
    second = search(
        vault, **{"from": "2026-02-01", "to": first["returned"]["from"], "max_tokens": 1000}
    )
    assert [m["content"] for m in second["memories"]] == ["older"]
    assert second["truncated"] is False


# --- the paging property -----------------------------------------------------------------


@pytest.fixture(scope="module", params=pg.BACKENDS if pg.available() else ["sqlite"])
def service(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[VaultService]:
    path: Path = tmp_path_factory.mktemp("paging") / "vault.sqlite3"
    if request.param == "sqlite":
        store: SQLiteStore | PostgresStore = SQLiteStore(path)
        yield VaultService(store, clock=FakeClock(), lease_seconds=900)
        store.close()
        return
    databases: pg.Databases = request.getfixturevalue("postgres_databases")
    url = databases.create()
    store = PostgresStore(url, pool_min=0, pool_max=2)
    yield VaultService(store, clock=FakeClock(), lease_seconds=900)
    store.close()
    databases.release(url)


def visit(
    service: VaultService,
    access: Access,
    start: int,
    end: int,
    order: Order,
    budget: int,
    where: SearchFilter,
) -> list[str]:
    seen: list[str] = []
    lo, hi = start, end
    for _ in range(10_000):
        page, _ = service.date_search(access, lo, hi, None, where, budget, order)
        seen += [h.memory.id for h in page.rows]
        if not page.truncated:
            return seen
        # The documented continuation: newest first -> to: returned.from;
        # oldest first -> from: returned.to.
        lo, hi = (page.returned_to, hi) if order == "oldest_first" else (lo, page.returned_from)
    raise AssertionError("paging did not terminate")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    offsets=st.lists(st.sampled_from([0, 1, 2, 5, 60_000, DAY, 3 * DAY]), min_size=1, max_size=60),
    sizes=st.lists(st.integers(min_value=1, max_value=1700), min_size=1, max_size=60),
    window=st.tuples(st.integers(-DAY, 4 * DAY), st.integers(0, 5 * DAY)),
    budget=st.integers(min_value=1, max_value=6000),
    order=st.sampled_from(["newest_first", "oldest_first"]),
    reflect=st.integers(min_value=0, max_value=3),
)
def test_following_returned_visits_every_row_of_the_window_exactly_once(
    service: VaultService,
    offsets: list[int],
    sizes: list[int],
    window: tuple[int, int],
    budget: int,
    order: Order,
    reflect: int,
) -> None:
    key, _ = service.create_vault()
    access = service.authenticate(key)
    messages = [
        IncomingMessage("user", "m" * sizes[i % len(sizes)] + f" {i}", BASE + offset)
        for i, offset in enumerate(offsets)
    ]
    service.ingest(access, messages, None)
    for n in range(reflect):  # reflections with coverage windows spanning several rows
        batch = service.checkout(access, 1, 1000, None)
        if isinstance(batch, Batch):
            service.commit(access, batch.batch_id, [Entry(f"Summary {n}.", 5)], None)
    start = BASE + min(window)
    end = BASE + max(window)
    where = SearchFilter()
    seen = visit(service, access, start, end, order, budget, where)
    everything = service.date_search(access, -(10**15), 10**15, None, where, 200_000, order)[0]
    expected = {
        h.memory.id
        for h in everything.rows
        if h.memory.date_from <= end and h.memory.date_to >= start
    }
    assert len(seen) == len(set(seen))
    assert set(seen) == expected
