"""Every command that takes a memory key (reflect, auto, import, export) takes it from the
environment or from a file, so it need not be on the command line where ``ps`` shows it; a
key file others may read is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mcp_memoryrouter.cli import main
from tests.support.reflect import Served

COMMANDS = ["reflect", "auto", "import", "export"]


def invoke(served: Served, tmp_path: Path, command: str, *extra: str, **env: str) -> Result:
    args = {
        "reflect": ["reflect", "--model-cmd", "cat", "--json"],
        "auto": ["auto", "--model-cmd", "cat", "--json"],
        "import": ["import", str(one_memory(tmp_path)), "--json"],
        "export": ["export"],
    }[command]
    return CliRunner().invoke(
        main,
        [*args, "--api-url", served.url, *extra],
        env={"MEMORYROUTER_HOME": str(tmp_path / "home"), **env},
    )


def one_memory(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"content": "Ana likes tea.", "date": "2026-02-01"}) + "\n")
    return path


def key_file(tmp_path: Path, key: str, mode: int = 0o600) -> Path:
    path = tmp_path / "memory.key"
    path.write_text(key + "\n")
    path.chmod(mode)
    return path


def assert_opened_the_vault(command: str, result: Result) -> None:
    assert result.exit_code == 0, result.output
    if command == "auto":  # auto exits 0 whatever happens: its status says it
        assert json.loads(result.stdout)["status"] == "nothing_to_consolidate", result.output
    if command == "import":
        assert json.loads(result.stdout)["stored"] == 1


@pytest.mark.parametrize("command", COMMANDS)
def test_the_key_can_come_from_the_environment(
    served: Served, tmp_path: Path, command: str
) -> None:
    result = invoke(served, tmp_path, command, MEMORYROUTER_KEY=served.key)
    assert_opened_the_vault(command, result)
    assert "warning" not in result.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_the_key_can_come_from_a_file_named_on_the_command_line(
    served: Served, tmp_path: Path, command: str
) -> None:
    path = key_file(tmp_path, served.key)
    result = invoke(served, tmp_path, command, "--key-file", str(path))
    assert_opened_the_vault(command, result)
    assert "warning" not in result.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_the_key_file_can_be_named_in_the_environment(
    served: Served, tmp_path: Path, command: str
) -> None:
    path = key_file(tmp_path, served.key)
    result = invoke(served, tmp_path, command, MEMORYROUTER_KEY_FILE=str(path))
    assert_opened_the_vault(command, result)


def test_the_key_in_the_file_is_the_one_used(served: Served, tmp_path: Path) -> None:
    path = key_file(tmp_path, "mk_" + "x" * 40)
    result = invoke(served, tmp_path, "export", "--key-file", str(path))
    assert result.exit_code == 1 and "Unauthorized" in result.output


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_key_file_group_or_others_can_read_is_refused_naming_it(
    served: Served, tmp_path: Path, command: str, mode: int
) -> None:
    path = key_file(tmp_path, served.key, mode)
    result = invoke(served, tmp_path, command, "--key-file", str(path))
    assert result.exit_code == 2, result.output
    assert str(path) in result.output and "chmod 600" in result.output
    assert result.stdout == ""
    assert served.stats()["total_memories"] == 0  # import sent nothing


@pytest.mark.parametrize("content", ["", "\n\n", "mk_one\nmk_two\n", "x" * 5000])
def test_a_key_file_that_holds_no_single_key_is_a_usage_error(
    served: Served, tmp_path: Path, content: str
) -> None:
    path = tmp_path / "memory.key"
    path.write_text(content)
    path.chmod(0o600)
    result = invoke(served, tmp_path, "export", "--key-file", str(path))
    assert result.exit_code == 2, result.output
    assert str(path) in result.output


def test_a_missing_key_file_is_a_usage_error_naming_it(served: Served, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.key"
    result = invoke(served, tmp_path, "export", "--key-file", str(missing))
    assert result.exit_code == 2 and str(missing) in result.output


def test_a_key_on_the_command_line_still_works_with_a_warning(
    served: Served, tmp_path: Path
) -> None:
    result = invoke(served, tmp_path, "export", "--key", served.key)
    assert result.exit_code == 0, result.output
    assert "MEMORYROUTER_KEY" in result.stderr and "--key-file" in result.stderr


def test_the_command_line_beats_the_environment_and_two_ways_at_once_are_refused(
    served: Served, tmp_path: Path
) -> None:
    good = key_file(tmp_path, served.key)
    wrong = "mk_" + "x" * 40
    over_env = invoke(served, tmp_path, "export", "--key-file", str(good), MEMORYROUTER_KEY=wrong)
    assert over_env.exit_code == 0, over_env.output
    both = invoke(served, tmp_path, "export", "--key", served.key, "--key-file", str(good))
    assert both.exit_code == 2
    both_env = invoke(
        served, tmp_path, "export", MEMORYROUTER_KEY=served.key, MEMORYROUTER_KEY_FILE=str(good)
    )
    assert both_env.exit_code == 2


def test_no_key_at_all_is_a_usage_error_that_names_both_ways(
    served: Served, tmp_path: Path
) -> None:
    result = invoke(served, tmp_path, "export")
    assert result.exit_code == 2
    assert "MEMORYROUTER_KEY" in result.output and "--key-file" in result.output
