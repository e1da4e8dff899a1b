"""``keys create --vault`` without ``--name`` names each key apart (``key 2``, ``key 3``…),
never a name one of the vault's keys already has; a new vault's first key is ``default``."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from mcp_memoryrouter.cli import main
from mcp_memoryrouter.commands.store import next_key_name


def keys(tmp_path: Path, *args: str) -> Result:
    result = CliRunner().invoke(main, ["keys", *args], env={"MEMORYROUTER_DATA_DIR": str(tmp_path)})
    assert result.exit_code == 0, result.output
    return result


def names(tmp_path: Path) -> list[str]:
    listed = json.loads(keys(tmp_path, "list", "--json").output)
    return [k["name"] for k in listed["vaults"][0]["keys"]]


def test_keys_added_to_a_vault_without_a_name_are_told_apart(tmp_path: Path) -> None:
    vault = json.loads(keys(tmp_path, "create", "--json").output)["vault"]
    for _ in range(2):
        keys(tmp_path, "create", "--vault", vault)
    keys(tmp_path, "create", "--vault", vault, "--name", "laptop")
    assert names(tmp_path) == ["default", "key 2", "key 3", "laptop"]
    second = json.loads(keys(tmp_path, "list", "--json").output)["vaults"][0]["keys"][1]
    keys(tmp_path, "revoke", second["id"])
    keys(tmp_path, "create", "--vault", vault)
    assert names(tmp_path) == ["default", "key 3", "laptop", "key 4"]


def test_the_next_name_skips_every_name_in_use() -> None:
    assert next_key_name(["default"]) == "key 2"
    assert next_key_name(["default", "key 3"]) == "key 4"
    assert next_key_name(["key 2", "key 3", "x"]) == "key 4"
    assert next_key_name([]) == "key 1"


def test_the_help_says_what_a_key_is_named_by_default(tmp_path: Path) -> None:
    shown = " ".join(keys(tmp_path, "create", "--help").output.split())
    assert "'key 2', 'key 3'" in shown
