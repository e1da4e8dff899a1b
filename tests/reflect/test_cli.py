"""The commands as a user runs them: help, usage errors, exit codes, two processes at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcp_memoryrouter.cli import main
from tests.support.reflect import ModelProgram, Served, wait_until

QUIET = {"REFLECT_TEST_GROUP": "100", "REFLECT_TEST_IMPORTANCE": "1"}
NOWHERE = "http://127.0.0.1:9"


@pytest.mark.parametrize("command", ["reflect", "auto", "import", "export"])
def test_help_explains_each_consolidation_command(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--help"])
    assert (
        result.exit_code == 0 and "Usage:" in result.output and "MEMORYROUTER_KEY" in result.output
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--model-cmd", "x", "--model-url", "http://llm", "--model", "m"],
        ["--model-url", "http://llm"],
        ["--model-url", "llm.example", "--model", "m"],
        [],
        ["--model-cmd", "'unbalanced"],
        ["--model-cmd", "x", "--tier", "3"],
    ],
)
def test_a_wrong_model_choice_is_a_usage_error(args: list[str]) -> None:
    result = CliRunner().invoke(main, ["reflect", *args], env={"MEMORYROUTER_KEY": "mk_x"})
    assert result.exit_code == 2, result.output


def test_reflect_against_an_unreachable_vault_exits_1_naming_the_failure() -> None:
    args = ["reflect", "--api-url", NOWHERE, "--key", "mk_x", "--model-cmd", "cat"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "TransportFailure" in result.output


def test_auto_exits_0_even_when_it_fails_and_logs_why(tmp_path: Path) -> None:
    args = ["auto", "--api-url", NOWHERE, "--key", "mk_x", "--model-cmd", "cat", "--json"]
    result = CliRunner().invoke(main, args, env={"MEMORYROUTER_HOME": str(tmp_path)})
    assert result.exit_code == 0
    assert json.loads(result.stdout)["status"] == "failed"
    assert "TransportFailure" in (tmp_path / "consolidate.log").read_text()


def test_export_to_stdout_writes_one_json_line_per_memory(served: Served) -> None:
    served.ingest(3)
    result = CliRunner().invoke(
        main, ["export", "--api-url", served.url], env={"MEMORYROUTER_KEY": served.key}
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["tier"] for line in lines] == [1, 1, 1]
    assert set(lines[0]) == {"id", "tier", "role", "content", "date", "consolidated", "stored_by"}
    assert lines[0]["consolidated"] is False  # the vault's debt survives a round trip


def test_two_processes_at_once_one_holds_the_lock_and_the_other_does_nothing(
    served: Served, program: ModelProgram, home: Path, tmp_path: Path
) -> None:
    served.ingest(1100)  # 55,000 tokens: one batch clears the debt
    release = tmp_path / "release"
    env = program.environ(
        MEMORYROUTER_HOME=str(home),
        MEMORYROUTER_KEY=served.key,
        REFLECT_TEST_MODE="block",
        REFLECT_TEST_RELEASE=str(release),
        **QUIET,
    )
    args = [sys.executable, "-m", "mcp_memoryrouter", "auto", "--api-url", served.url]
    args += ["--model-cmd", program.command, "--json"]
    first = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True)
    try:
        wait_until(program.inputs)  # the first process is inside its model call
        second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 0
        assert json.loads(second.stdout)["status"] == "locked"
        release.touch()
        out, _ = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert json.loads(out) == {
        "status": "ran",
        "batches": 1,
        "failed_batches": 0,
        "stopped": "below_threshold",
        "detail": "",
    }
    assert len(program.inputs()) == 1
    assert os.path.exists(home / "consolidate.state")


def test_auto_on_a_small_vault_says_what_waits_and_the_command_that_consolidates_now(
    served: Served, program: ModelProgram, home: Path
) -> None:
    served.ingest(21)
    args = ["auto", "--api-url", served.url, "--model-cmd", program.command]
    env = {"MEMORYROUTER_KEY": served.key, "MEMORYROUTER_HOME": str(home), **program.env}
    said = CliRunner().invoke(main, args, env=env)
    assert said.exit_code == 0, said.output
    assert said.stdout.startswith("below_threshold: 21 raw memories")
    assert "mcp-memoryrouter reflect --until-empty" in said.stdout
    body = json.loads(CliRunner().invoke(main, [*args, "--json"], env=env).stdout)
    assert (body["status"], body["batches"], body["stopped"]) == ("below_threshold", 0, None)
    assert program.inputs() == []
