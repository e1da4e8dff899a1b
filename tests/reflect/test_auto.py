"""Debt-triggered consolidation as the connectors run it, against a real server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcp_memoryrouter import schemas
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.reflect.auto import AutoConsolidator
from mcp_memoryrouter.reflect.loop import backfill
from tests.support.reflect import ModelProgram, Seconds, Served, assert_no_ids, contract_rules

pytestmark = pytest.mark.anyio
MINUTE = 60.0
QUIET = {"REFLECT_TEST_GROUP": "100", "REFLECT_TEST_IMPORTANCE": "1"}  # little tier 2 debt


@pytest.fixture
async def client(served: Served) -> AsyncIterator[VaultClient]:
    client = served.client()
    yield client
    await client.aclose()


async def debt(client: VaultClient) -> schemas.Reflection:
    return (await client.stats()).reflection


def log_of(home: Path) -> str:
    return (home / "consolidate.log").read_text(encoding="utf-8")


async def test_a_triggered_run_stops_after_three_batches_even_with_debt_left(
    served: Served, client: VaultClient, program: ModelProgram, home: Path, clock: Seconds
) -> None:
    served.ingest(5200)  # 260,000 tokens: five default batches
    auto = AutoConsolidator(client, program.model(**QUIET), home=home, clock=clock)
    outcome = await auto.run_if_due(await debt(client))
    assert outcome.status == "ran" and outcome.report is not None
    assert outcome.report.stopped == "batch_limit"
    assert [b.tier for b in outcome.report.batches] == [1, 1, 1]
    assert len(program.inputs()) == 3
    after = await debt(client)
    assert after.unconsolidated.raw.units == 5200 - 3 * 1000
    assert after.suggestion is not None
    assert_no_ids(program.inputs())
    assert not (home / "consolidate.lock").exists()


async def test_a_triggered_run_stops_as_soon_as_the_suggestion_is_null(
    served: Served, client: VaultClient, program: ModelProgram, home: Path, clock: Seconds
) -> None:
    served.ingest(2200)  # 110,000 tokens: 330 importance equivalent
    auto = AutoConsolidator(client, program.model(**QUIET), home=home, clock=clock)
    outcome = await auto.run_if_due(await debt(client))
    assert outcome.report is not None
    assert outcome.report.stopped == "below_threshold"
    assert len(outcome.report.batches) == len(program.inputs()) == 2  # 10,000 tokens left
    assert (await debt(client)).suggestion is None


async def test_tier_2_debt_is_consolidated_into_tier_3(
    served: Served, client: VaultClient, program: ModelProgram, home: Path, clock: Seconds
) -> None:
    served.ingest(200)  # 10,000 tokens: no raw debt
    writer = program.model(REFLECT_TEST_GROUP="10", REFLECT_TEST_IMPORTANCE="10")
    await backfill(client, writer, 1, until_empty=True)  # 20 reflections of importance 10
    before = await debt(client)
    assert before.suggestion is not None and before.suggestion.startswith("tier 2")
    auto = AutoConsolidator(client, writer, home=home, clock=clock)
    outcome = await auto.run_if_due(before)
    assert outcome.report is not None
    assert [b.tier for b in outcome.report.batches] == [2]
    assert outcome.report.stopped == "below_threshold"
    stats = await client.stats()
    assert stats.tiers["3"].count > 0
    assert stats.reflection.unconsolidated.tier2.count == 5  # 15 x 10 importance taken
    assert program.inputs()[-1].startswith(contract_rules(2))


async def test_an_empty_vault_means_no_run_and_no_trace(
    client: VaultClient, program: ModelProgram, home: Path, clock: Seconds
) -> None:
    auto = AutoConsolidator(client, program.model(), home=home, clock=clock)
    assert (await auto.run_if_due(await debt(client))).status == "nothing_to_consolidate"
    assert (await auto.check_and_run()).status == "nothing_to_consolidate"
    assert program.inputs() == []
    assert not (home / "consolidate.lock").exists()


async def test_a_small_vault_is_below_the_threshold_and_says_what_waits(
    served: Served, client: VaultClient, program: ModelProgram, home: Path, clock: Seconds
) -> None:
    served.ingest(21)  # a first try: 21 moments, far under the 50,000-token threshold
    auto = AutoConsolidator(client, program.model(), home=home, clock=clock)
    for outcome in (await auto.run_if_due(await debt(client)), await auto.check_and_run()):
        assert outcome.status == "below_threshold" and outcome.report is None
        assert "21 raw memories" in outcome.detail
    assert program.inputs() == []
    assert (await debt(client)).unconsolidated.raw.units == 21


async def test_auto_consolidate_false_in_the_config_opts_out(
    served: Served, client: VaultClient, program: ModelProgram, home: Path, clock: Seconds
) -> None:
    served.ingest(1100)
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"autoConsolidate": False}))
    auto = AutoConsolidator(client, program.model(), home=home, clock=clock)
    assert (await auto.run_if_due(await debt(client))).status == "disabled"
    (home / "config.json").write_text("{not json")
    assert (await auto.run_if_due(await debt(client))).status == "disabled"
    assert "unreadable config" in log_of(home)
    assert program.inputs() == []
    assert (await debt(client)).unconsolidated.raw.units == 1100


async def test_a_completed_run_is_followed_by_a_30_minute_cooldown(
    served: Served, client: VaultClient, program: ModelProgram, home: Path, clock: Seconds
) -> None:
    served.ingest(2000)  # 100,000 tokens; 1,000-token batches leave the debt standing
    auto = AutoConsolidator(client, program.model(**QUIET), home=home, clock=clock, max_tokens=1000)
    assert (await auto.run_if_due(await debt(client))).status == "ran"
    assert len(program.inputs()) == 3
    assert json.loads((home / "consolidate.state").read_text()) == {"last_completed": clock()}
    clock.advance(29 * MINUTE)
    assert (await auto.run_if_due(await debt(client))).status == "cooling_down"
    assert (await auto.check_and_run()).status == "cooling_down"
    assert len(program.inputs()) == 3
    clock.advance(1 * MINUTE)
    assert (await auto.run_if_due(await debt(client))).status == "ran"
    assert len(program.inputs()) == 6


async def test_a_held_lock_means_nothing_happens(
    served: Served, client: VaultClient, program: ModelProgram, home: Path, clock: Seconds
) -> None:
    served.ingest(1100)
    home.mkdir()
    held = json.dumps({"pid": 4242, "timestamp": clock() - 19 * MINUTE})
    (home / "consolidate.lock").write_text(held)
    auto = AutoConsolidator(client, program.model(), home=home, clock=clock)
    assert (await auto.run_if_due(await debt(client))).status == "locked"
    assert program.inputs() == []
    assert (home / "consolidate.lock").read_text() == held
    assert (await debt(client)).unconsolidated.raw.units == 1100


async def test_a_lock_older_than_20_minutes_is_taken_over(
    served: Served, client: VaultClient, program: ModelProgram, home: Path, clock: Seconds
) -> None:
    served.ingest(1100)
    home.mkdir()
    stale = json.dumps({"pid": 4242, "timestamp": clock() - 21 * MINUTE})
    (home / "consolidate.lock").write_text(stale)
    auto = AutoConsolidator(client, program.model(**QUIET), home=home, clock=clock)
    outcome = await auto.run_if_due(await debt(client))
    assert outcome.status == "ran"
    assert outcome.report is not None and outcome.report.batches[0].committed
    assert not (home / "consolidate.lock").exists()  # released after the run


async def test_garbage_gets_one_retry_then_the_batch_expires_uncommitted_and_is_logged(
    served: Served, client: VaultClient, program: ModelProgram, home: Path, clock: Seconds
) -> None:
    served.ingest(1100)
    auto = AutoConsolidator(
        client, program.model(REFLECT_TEST_MODE="garbage"), home=home, clock=clock
    )
    outcome = await auto.run_if_due(await debt(client))
    assert outcome.status == "ran" and outcome.report is not None
    assert outcome.report.stopped == "batch_failed"
    (failed,) = outcome.report.batches
    assert not failed.committed and failed.failure is not None
    first, retry = program.inputs()
    assert retry.startswith(first)
    added = retry[len(first) :].strip()
    assert "\n" not in added and "entries" in added  # one line: the validation error
    assert_no_ids([first, retry])
    assert "not committed" in log_of(home) and "InvalidAnswer" in log_of(home)
    stats = await client.stats()
    assert stats.tiers["2"].count == 0
    served.vault.clock.advance(901)  # the lease runs out: the same memories are free again
    again = await client.checkout(schemas.CheckoutRequest(tier=1))
    assert again.count == failed.memories


async def test_a_corrected_answer_on_the_retry_is_committed(
    served: Served, client: VaultClient, program: ModelProgram, home: Path, clock: Seconds
) -> None:
    served.ingest(1100)
    model = program.model(REFLECT_TEST_MODE="garbage-first", **QUIET)
    auto = AutoConsolidator(client, model, home=home, clock=clock)
    outcome = await auto.run_if_due(await debt(client))
    assert outcome.report is not None and outcome.report.batches[0].committed
    assert len(program.inputs()) == 2


async def test_fenced_answers_with_prose_are_committed(
    served: Served, client: VaultClient, program: ModelProgram, home: Path, clock: Seconds
) -> None:
    served.ingest(1100)
    model = program.model(REFLECT_TEST_MODE="fenced", **QUIET)
    auto = AutoConsolidator(client, model, home=home, clock=clock)
    outcome = await auto.run_if_due(await debt(client))
    assert outcome.report is not None and outcome.report.batches[0].committed
    assert len(program.inputs()) == 1


async def test_an_unreachable_vault_is_logged_and_never_raised(
    program: ModelProgram, home: Path, clock: Seconds
) -> None:
    client = VaultClient("http://127.0.0.1:9", "mk_x", timeout=5)
    auto = AutoConsolidator(client, program.model(), home=home, clock=clock)
    outcome = await auto.check_and_run()
    await client.aclose()
    assert outcome.status == "failed"
    assert "TransportFailure" in log_of(home)
    assert program.inputs() == []
