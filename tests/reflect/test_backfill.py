"""``mcp-memoryrouter reflect``: a historical backfill against a real server."""

from __future__ import annotations

import json
import re
from typing import Any

from click.testing import CliRunner

from mcp_memoryrouter.cli import main
from tests.support.reflect import ModelProgram, Served, assert_no_ids, contract_rules


def reflect(served: Served, program: ModelProgram, *args: str, **env: str) -> Any:
    return CliRunner().invoke(
        main,
        ["reflect", "--api-url", served.url, "--model-cmd", program.command, "--json", *args],
        env={"MEMORYROUTER_KEY": served.key, **program.env, **env},
    )


def summaries(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_backfill_consolidates_5000_raw_memories_to_empty_then_tier_2_into_tier_3(
    served: Served, program: ModelProgram
) -> None:
    raw_ids = served.ingest(5000, chars=80)
    program.env["REFLECT_TEST_GROUP"] = "50"  # 20 reflections per batch of 1,000 memories
    first = reflect(served, program, "--tier", "1", "--max-batches", "2", "--max-tokens", "20000")
    assert first.exit_code == 0, first.output
    assert summaries(first.stdout)[0]["batches"] == 2

    rest = reflect(served, program, "--tier", "1", "--until-empty", "--max-tokens", "20000")
    assert rest.exit_code == 0, rest.output
    (tier1,) = summaries(rest.stdout)
    assert tier1["stopped"] == "nothing_to_consolidate" and tier1["waiting"] == 0
    assert 2 * 1000 + tier1["memories"] == len(raw_ids)  # resumed where the first run ended
    stats = served.stats()
    assert stats["reflection"]["unconsolidated"]["raw"]["units"] == 0
    assert stats["tiers"]["2"]["count"] == stats["reflection"]["unconsolidated"]["tier2"]["count"]

    top = reflect(served, program, "--tier", "2", "--until-empty")
    assert top.exit_code == 0, top.output
    (tier2,) = summaries(top.stdout)
    assert tier2["memories"] == stats["tiers"]["2"]["count"] == 100
    assert tier2["batches"] > 1
    final = served.stats()
    assert final["reflection"]["unconsolidated"]["tier2"]["count"] == 0
    assert final["tiers"]["3"]["count"] == tier2["reflections"] > 0

    inputs = program.inputs()
    assert_no_ids(inputs)
    tier1_inputs = 2 + tier1["batches"]
    # contract 2: its rules verbatim, then what the vault already holds, then the lines
    assert all(i.startswith(contract_rules(1)) for i in inputs[:tier1_inputs])
    assert all(i.startswith(contract_rules(2)) for i in inputs[tier1_inputs:])
    shown = sum(len(re.findall(r"\n[0-9]+\. \[2026-", i)) for i in inputs[:tier1_inputs])
    assert shown == len(raw_ids)  # every memory shown once, as a numbered [date] line


def test_without_until_empty_the_backfill_stops_once_the_server_no_longer_suggests_it(
    served: Served, program: ModelProgram
) -> None:
    served.ingest(1400)  # 70,000 tokens: 210 importance equivalent
    result = reflect(served, program, "--tier", "1", "--max-tokens", "10000")
    assert result.exit_code == 0, result.output
    (summary,) = summaries(result.stdout)
    assert summary["stopped"] == "below_threshold" and summary["waiting"] > 0
    assert summary["suggestion"] is None or "raw" not in summary["suggestion"]
    assert served.stats()["reflection"]["unconsolidated"]["raw"]["importance_equiv"] < 150
    assert summary["batches"] == 3  # 70,000 - 3 x 10,000 = 40,000 tokens: 120 < 150


def test_a_failing_model_makes_reflect_exit_1_and_commits_nothing(
    served: Served, program: ModelProgram
) -> None:
    served.ingest(50)
    result = reflect(served, program, "--tier", "1", "--until-empty", REFLECT_TEST_MODE="garbage")
    assert result.exit_code == 1
    (summary,) = summaries(result.stdout)
    assert summary["batches"] == 0 and summary["failed_batches"] == 1
    assert summary["stopped"] == "all_leased"  # the failed batch is still leased
    assert summary["waiting"] == 50
    assert served.stats()["tiers"]["2"]["count"] == 0
    assert "InvalidAnswer" in result.stderr


def test_a_small_vault_waits_below_the_threshold_until_asked_for_until_empty(
    served: Served, program: ModelProgram
) -> None:
    served.ingest(21)  # a first try: 21 moments, far under the 50,000-token threshold
    words = CliRunner().invoke(
        main,
        ["reflect", "--api-url", served.url, "--model-cmd", program.command],
        env={"MEMORYROUTER_KEY": served.key, **program.env},
    )
    assert words.exit_code == 0, words.output
    tier1_line = words.stdout.splitlines()[0]
    assert "below_threshold" in tier1_line and "--until-empty" in tier1_line
    waited = reflect(served, program)
    assert [(s["batches"], s["stopped"]) for s in summaries(waited.stdout)] == [
        (0, "below_threshold"),
        (0, "nothing_to_consolidate"),
    ]
    assert summaries(waited.stdout)[0]["waiting"] == 21
    assert program.inputs() == []

    now = reflect(served, program, "--until-empty")
    assert now.exit_code == 0, now.output
    assert now.stderr == ""  # no progress bar off a terminal: not even its label
    tier1, tier2 = summaries(now.stdout)
    assert (tier1["memories"], tier1["stopped"], tier1["waiting"]) == (
        21,
        "nothing_to_consolidate",
        0,
    )
    assert tier2["memories"] == tier1["reflections"] > 0
    assert tier2["stopped"] == "nothing_to_consolidate"
    stats = served.stats()
    assert stats["tiers"]["2"]["count"] > 0 and stats["tiers"]["3"]["count"] > 0
