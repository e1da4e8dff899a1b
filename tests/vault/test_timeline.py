"""``GET /v1/memory/timeline``: memories per day, week or month and tier, at the date the API
shows for each, summing to what stats counts; and the pure folding of days into buckets."""

from __future__ import annotations

from datetime import date
from typing import Any, get_args

import pytest

from mcp_memoryrouter import schemas
from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.vault.rules.dates import format_ms
from mcp_memoryrouter.vault.rules.timeline import (
    BUCKET_SIZES,
    BucketSize,
    TimelineBucket,
    bucket_size,
    bucket_start,
    fold,
)
from tests.support import Vault
from tests.support.api import assert_envelope

TIMELINE = "/v1/memory/timeline"
CHECKOUT = "/v1/memory/consolidate/checkout"
COMMIT = "/v1/memory/consolidate/commit"


def timeline(vault: Vault, bucket: str | None = None, key: str | None = None) -> dict[str, Any]:
    query = "" if bucket is None else f"?bucket={bucket}"
    response = vault.http.get(TIMELINE + query, headers=vault.headers(key))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def counts(body: dict[str, Any]) -> dict[str, list[int]]:
    """start → [tier 1, tier 2, tier 3]."""
    return {b["start"]: [b["tiers"][t] for t in ("1", "2", "3")] for b in body["buckets"]}


def stats_tiers(vault: Vault, key: str | None = None) -> dict[str, int]:
    stats = vault.http.get("/v1/memory/stats", headers=vault.headers(key)).json()
    return {tier: t["count"] for tier, t in stats["tiers"].items()}


def summed(body: dict[str, Any]) -> dict[str, int]:
    total = {"1": 0, "2": 0, "3": 0}
    for b in body["buckets"]:
        for tier, n in b["tiers"].items():
            total[tier] += n
    return total


def reflect(vault: Vault, tier: int, *importance: int) -> list[str]:
    """Check out ``tier`` and commit one reflection per importance: their ids."""
    batch = vault.post(CHECKOUT, {"tier": tier}).json()
    assert batch["batch_id"], batch
    entries = [
        {"text": f"Reflection {n} of tier {tier}.", "importance": i}
        for n, i in enumerate(importance)
    ]
    done = vault.post(COMMIT, {"batch_id": batch["batch_id"], "entries": entries})
    assert done.status_code == 200, done.text
    return [c["id"] for c in done.json()["created"]]


# --- the route --------------------------------------------------------------------------------

DATED = [
    "2026-01-05T10:00:00Z",  # a Monday
    "2026-01-11T23:59:59.999Z",  # the Sunday of that week
    "2026-01-12T00:00:00Z",  # the next Monday
    "2026-01-12T08:00:00Z",
    "2026-01-31T12:00:00Z",  # a Saturday
    "2026-02-01T00:30:00+01:00",  # 2026-01-31T23:30Z: the UTC day counts
    "2026-02-01T09:00:00Z",  # a Sunday: still the week of 2026-01-26, but February
    "1969-12-31T23:00:00Z",  # before 1970: a Wednesday, the week of 1969-12-29
]


def ingest_dated(vault: Vault, key: str | None = None) -> None:
    for n, moment in enumerate(DATED):
        vault.ingest(f"moment number {n}", date=moment, key=key)


def test_days_weeks_and_months_count_each_memory_once_at_its_utc_date(vault: Vault) -> None:
    ingest_dated(vault)
    by_day = timeline(vault, "day")
    assert by_day["bucket"] == "day"
    assert counts(by_day) == {
        "1969-12-31": [1, 0, 0],
        "2026-01-05": [1, 0, 0],
        "2026-01-11": [1, 0, 0],
        "2026-01-12": [2, 0, 0],
        "2026-01-31": [2, 0, 0],
        "2026-02-01": [1, 0, 0],
    }
    assert [b["start"] for b in by_day["buckets"]] == sorted(counts(by_day))
    assert counts(timeline(vault, "week")) == {
        "1969-12-29": [1, 0, 0],
        "2026-01-05": [2, 0, 0],
        "2026-01-12": [2, 0, 0],
        "2026-01-26": [3, 0, 0],
    }
    by_month = timeline(vault, "month")
    assert counts(by_month) == {
        "1969-12-01": [1, 0, 0],
        "2026-01-01": [6, 0, 0],
        "2026-02-01": [1, 0, 0],
    }
    assert timeline(vault) == by_month  # month by default
    assert set(by_month) == {"vault", "bucket", "buckets", "last_reflection_at"}
    assert by_month["last_reflection_at"] is None  # no reflection yet
    assert (
        by_month["vault"]
        == vault.http.get("/v1/keys/current", headers=vault.headers()).json()["vault"]
    )
    assert all(set(b) == {"start", "tiers"} for b in by_month["buckets"])


def test_an_empty_vault_has_no_buckets(vault: Vault) -> None:
    for size in BUCKET_SIZES:
        assert timeline(vault, size)["buckets"] == []


def test_reflections_count_in_their_tier_at_the_start_of_their_coverage(vault: Vault) -> None:
    for moment in ("2026-03-10T09:00:00Z", "2026-03-12T09:00:00Z", "2026-04-02T09:00:00Z"):
        vault.ingest(f"what happened on {moment}", date=moment)
    tier2 = reflect(vault, 1, 6, 7)
    first = timeline(vault)["last_reflection_at"]
    assert first == format_ms(vault.clock())  # when the consolidation committed
    vault.clock.advance(3600)
    [tier3] = reflect(vault, 2, 8)
    assert timeline(vault)["last_reflection_at"] == format_ms(vault.clock()) > first
    # the date the API shows for a reflection: the start of what it covers
    for memory_id in (*tier2, tier3):
        shown = vault.post("/v1/memory/inspect", {"memory_id": memory_id}).json()
        assert shown["date"] == shown["covers"]["from"] == "2026-03-10T09:00:00.000Z"
    assert counts(timeline(vault, "month")) == {"2026-03-01": [2, 2, 1], "2026-04-01": [1, 0, 0]}
    assert counts(timeline(vault, "day")) == {
        "2026-03-10": [1, 2, 1],
        "2026-03-12": [1, 0, 0],
        "2026-04-02": [1, 0, 0],
    }
    assert summed(timeline(vault, "week")) == stats_tiers(vault) == {"1": 3, "2": 2, "3": 1}


def test_a_deleted_memory_is_not_counted(vault: Vault) -> None:
    gone = vault.ingest("gone", date="2026-05-05T10:00:00Z")["ids"][0]
    vault.ingest("kept", date="2026-05-05T11:00:00Z")
    vault.ingest("alone on its day", date="2026-05-20T10:00:00Z")
    assert counts(timeline(vault, "day")) == {"2026-05-05": [2, 0, 0], "2026-05-20": [1, 0, 0]}
    assert vault.post("/v1/memory/delete-ids", {"ids": [gone]}).json()["deleted"] == 1
    assert counts(timeline(vault, "day")) == {"2026-05-05": [1, 0, 0], "2026-05-20": [1, 0, 0]}
    assert vault.sql("SELECT id FROM memories WHERE id = ?", (gone,)) == []  # no row left
    # a bucket left empty by a delete is not shown
    [(alone,)] = vault.sql("SELECT id FROM memories WHERE content = ?", ("alone on its day",))
    assert vault.post("/v1/memory/delete-ids", {"ids": [alone]}).json()["deleted"] == 1
    assert counts(timeline(vault, "day")) == {"2026-05-05": [1, 0, 0]}


def test_the_counts_summed_over_buckets_equal_stats_per_tier(vault: Vault) -> None:
    ingest_dated(vault)
    vault.ingest("in another vault", date="2026-01-05", key=vault.new_key())
    tier2 = reflect(vault, 1, 5, 6, 9)
    reflect(vault, 2, 4)
    vault.ingest("after the reflections", date="2026-06-30T23:59:59Z")
    [(raw,)] = vault.sql("SELECT id FROM memories WHERE content = ?", ("moment number 0",))
    deleted = vault.post("/v1/memory/delete-ids", {"ids": [raw, tier2[0]]}).json()
    assert deleted["deleted"] == 2
    expected = stats_tiers(vault)
    assert expected == {"1": 8, "2": 2, "3": 1}
    for size in BUCKET_SIZES:
        assert summed(timeline(vault, size)) == expected, size
    vault.post("/v1/memory/delete-ids", {"ids": [tier2[1]], "derived": True})
    expected = stats_tiers(vault)
    assert expected == {"1": 8, "2": 1, "3": 0}
    for size in BUCKET_SIZES:
        assert summed(timeline(vault, size)) == expected, size


def test_another_vaults_memories_are_not_counted(vault: Vault) -> None:
    other = vault.new_key()
    vault.ingest("mine", date="2026-07-01")
    for n in range(3):
        vault.ingest(f"theirs {n}", date="2026-07-01", key=other)
    vault.ingest("theirs, later", date="2026-08-15", key=other)
    mine, theirs = timeline(vault), timeline(vault, key=other)
    assert counts(mine) == {"2026-07-01": [1, 0, 0]}
    assert counts(theirs) == {"2026-07-01": [3, 0, 0], "2026-08-01": [1, 0, 0]}
    assert mine["vault"] != theirs["vault"]
    assert summed(theirs) == stats_tiers(vault, other)


@pytest.mark.parametrize("bad", ["year", "", "Month", "week ", "days"])
def test_a_bucket_other_than_day_week_or_month_is_400_naming_bucket(vault: Vault, bad: str) -> None:
    response = vault.http.get(TIMELINE, params={"bucket": bad}, headers=vault.headers())
    assert_envelope(response, 400, "invalid_request")
    assert response.json()["error"]["details"] == {"field": "bucket"}
    assert "bucket" in response.json()["error"]["message"]


def test_any_key_that_may_read_may_ask_and_no_other(vault: Vault) -> None:
    vault.ingest("readable", date="2026-09-09")
    read_only = vault.post("/v1/keys", {"read_only": True}).json()["key"]
    expected = timeline(vault, "day")
    for key in (read_only, vault.key + ":read", read_only + ":read"):
        assert timeline(vault, "day", key) == expected
    for key in (vault.key + ":write", vault.key + ":off"):
        response = vault.http.get(TIMELINE, headers=vault.headers(key))
        assert_envelope(response, 403, "forbidden")
    assert_envelope(vault.http.get(TIMELINE), 401, "unauthorized")


def test_asking_is_not_metered(vault: Vault) -> None:
    vault.ingest("metered once", date="2026-10-10")
    before = vault.http.get("/v1/usage", headers=vault.headers()).json()
    for size in BUCKET_SIZES:
        timeline(vault, size)
    assert vault.http.get("/v1/usage", headers=vault.headers()).json() == before


# --- the pure rule ----------------------------------------------------------------------------

D = date(1970, 1, 1).toordinal()


def day(iso: str) -> int:
    """The day number since 1970-01-01 the store counts by."""
    return date.fromisoformat(iso).toordinal() - D


def folded(rows: list[tuple[int, int, int]], size: BucketSize) -> dict[str, list[int]]:
    return {b.start.isoformat(): [b.tiers[t] for t in (1, 2, 3)] for b in fold(rows, size)}


def test_fold_gathers_days_into_buckets_in_order_with_every_tier() -> None:
    rows = [
        (day("2026-02-01"), 3, 1),  # a Sunday
        (day("2026-01-26"), 1, 4),  # the Monday of that week
        (day("2026-01-31"), 2, 2),
        (day("2025-12-31"), 1, 1),
        (day("2026-01-01"), 1, 5),  # the same week as 2025-12-31, another month and year
    ]
    assert folded(rows, "day") == {
        "2025-12-31": [1, 0, 0],
        "2026-01-01": [5, 0, 0],
        "2026-01-26": [4, 0, 0],
        "2026-01-31": [0, 2, 0],
        "2026-02-01": [0, 0, 1],
    }
    assert folded(rows, "week") == {"2025-12-29": [6, 0, 0], "2026-01-26": [4, 2, 1]}
    assert folded(rows, "month") == {
        "2025-12-01": [1, 0, 0],
        "2026-01-01": [9, 2, 0],
        "2026-02-01": [0, 0, 1],
    }
    assert [b.start for b in fold(rows, "week")] == [date(2025, 12, 29), date(2026, 1, 26)]


def test_fold_keeps_only_non_empty_buckets_and_reaches_both_ends_of_the_calendar() -> None:
    assert fold([], "month") == ()
    assert fold([(day("2026-03-03"), 1, 0)], "day") == ()
    ends = [(day("0001-01-01"), 1, 1), (day("9999-12-31"), 2, 1), (-1, 3, 1)]
    assert folded(ends, "week") == {
        "0001-01-01": [1, 0, 0],  # a Monday
        "1969-12-29": [0, 0, 1],
        "9999-12-27": [0, 1, 0],
    }
    assert fold([(0, 1, 2)], "month") == (TimelineBucket(date(1970, 1, 1), {1: 2, 2: 0, 3: 0}),)


@pytest.mark.parametrize(
    ("iso", "week", "month"),
    [
        ("2026-01-05", "2026-01-05", "2026-01-01"),  # Monday
        ("2026-01-11", "2026-01-05", "2026-01-01"),  # Sunday
        ("2024-02-29", "2024-02-26", "2024-02-01"),
        ("2026-03-01", "2026-02-23", "2026-03-01"),
    ],
)
def test_a_bucket_starts_on_monday_or_the_first(iso: str, week: str, month: str) -> None:
    moment = date.fromisoformat(iso)
    assert bucket_start(moment, "day") == moment
    assert bucket_start(moment, "week").isoformat() == week
    assert bucket_start(moment, "month").isoformat() == month


def test_bucket_size_names_the_field_when_it_refuses() -> None:
    assert [bucket_size(s) for s in ("day", "week", "month")] == ["day", "week", "month"]
    assert get_args(schemas.BucketSize) == BUCKET_SIZES  # the wire model says the same
    with pytest.raises(InvalidRequest) as refused:
        bucket_size("quarter")
    assert refused.value.details == {"field": "bucket"}
