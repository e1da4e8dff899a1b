"""The reference tables in the docs say what the code does: docs/api.md's route table is the
set of routes the REST API answers, and README.md's settings table has a row for every
setting, with the default the code gives it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic_core import PydanticUndefined

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.app import create_vault_app

ROOT = Path(__file__).resolve().parents[1]
# Read elsewhere than Settings (tests/test_documented_commands.py lists them too).
NOT_SETTINGS = {"MEMORYROUTER_HOME"}


def documented_routes(text: str) -> set[str]:
    """``METHOD /path`` of each row of the route table (the rows that start with a route)."""
    return set(re.findall(r"^\| `((?:GET|POST|PUT|PATCH|DELETE) /[^`]*)` \|", text, re.M))


def served_routes(tmp_path: Path) -> set[str]:
    app = create_vault_app(Settings(data_dir=tmp_path, embeddings="none"))
    paths = app.openapi()["paths"]
    served = {f"{method.upper()} {path}" for path, ops in paths.items() for method in ops}
    return served | {"GET /openapi.json"}


def test_the_route_table_is_every_route_the_api_answers(tmp_path: Path) -> None:
    documented = documented_routes((ROOT / "docs" / "api.md").read_text())
    served = served_routes(tmp_path)
    assert served - documented == set(), "routes docs/api.md's table does not list"
    assert documented - served == set(), "rows of docs/api.md's table the API does not answer"


def test_a_route_missing_from_the_table_is_caught(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "api.md").read_text()
    dropped = "\n".join(line for line in text.splitlines() if "/v1/memory/export" not in line)
    assert served_routes(tmp_path) - documented_routes(dropped) == {"GET /v1/memory/export"}


def settings_rows(text: str) -> dict[str, str]:
    """Each documented variable -> the default the table gives it ("—" for none, a value in
    backticks, or words for a default worked out at run time)."""
    rows: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("| `MEMORYROUTER_"):
            continue
        names_cell, default_cell = [cell.strip() for cell in line.strip("|").split(" | ")[:2]]
        names = re.findall(r"`(MEMORYROUTER_[A-Z_]+)`", names_cell)
        defaults = [part.strip() for part in default_cell.split(", ")]
        if len(defaults) != len(names):
            defaults = [default_cell] * len(names)  # one default said for all of them
        for name, default in zip(names, defaults, strict=True):
            assert name not in rows, f"{name} has two rows"
            rows[name] = default
    return rows


def stated(field: str) -> object:
    """The default the code gives ``field``: its value, or ``None`` for one worked out at
    run time (a default factory other than an empty list)."""
    info = Settings.model_fields[field]
    if info.default is not PydanticUndefined:
        return info.default
    made = info.default_factory() if info.default_factory else None  # type: ignore[call-arg]
    return made if made == [] else None


def agrees(documented: str, default: object) -> bool:
    if documented == "—":
        return default is None
    quoted = re.fullmatch(r"`([^`]*)`", documented)
    if quoted is None:  # words: a default worked out at run time
        return default is None
    value = quoted.group(1)
    if re.search(r"[{$~]", value):  # a template (`{data_dir}/…`): worked out at run time
        return default is None
    if isinstance(default, bool) or default is None:
        return False
    if isinstance(default, int | float):
        return float(value) == float(default)
    if isinstance(default, list):
        return value == "[]" and default == []
    return value == str(default)


def test_the_settings_table_has_every_setting_with_its_default() -> None:
    rows = settings_rows((ROOT / "README.md").read_text())
    fields = {f"MEMORYROUTER_{name.upper()}": name for name in Settings.model_fields}
    assert set(fields) - set(rows) == set(), "settings README.md's table does not list"
    assert set(rows) - set(fields) - NOT_SETTINGS == set(), "rows that are no setting"
    wrong = {
        name: (rows[name], stated(field))
        for name, field in fields.items()
        if not agrees(rows[name], stated(field))
    }
    assert wrong == {}, "README.md's default differs from the code's"


@pytest.mark.parametrize(
    ("documented", "default", "expected"),
    [
        ("`600`", 600, True),
        ("`10`", 10.0, True),
        ("`601`", 600, False),
        ("—", None, True),
        ("—", 600, False),
        ("`[]`", [], True),
        ("`key`", "key", True),
        ("`oidc`", "key", False),
        ("the public host", None, True),
        ("the public host", "x", False),
        ("`{data_dir}/oauth-sealing.key`", None, True),
        ("`$DATA_DIR/oauth-bindings.json`", "/x", False),
    ],
)
def test_a_default_that_differs_is_caught(documented: str, default: object, expected: bool) -> None:
    assert agrees(documented, default) is expected
