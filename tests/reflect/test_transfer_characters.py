"""Export and import carry every character a memory may hold: NDJSON records end at "\\n"
only, so a line separator (U+2028, U+2029, U+0085) or a control character inside a memory's
content or session id is data, never the end of a record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mcp_memoryrouter.cli import main
from tests import pg
from tests.support.reflect import EVERY, Served


@pytest.fixture(params=pg.BACKENDS if pg.available() else ["sqlite"])
def store_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


def run(served: Served, *args: str) -> Result:
    return CliRunner().invoke(
        main, [*args, "--api-url", served.url], env={"MEMORYROUTER_KEY": served.key}
    )


def exported(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [json.loads(line) for line in text.split("\n")[:-1]]


def held(lines: list[dict[str, Any]]) -> set[tuple[str, str | None]]:
    return {(line["content"], line.get("session_id")) for line in lines}


def ingest_every_character(served: Served) -> set[tuple[str, str | None]]:
    """One memory per character (in the middle of its text and of its session id), and one
    memory holding them all."""
    messages = [(f"before {char} after", f"s{char}id") for char in EVERY]
    messages.append((f"all of them: {EVERY} end", f"all{EVERY}"))
    with served.http() as http:
        for content, session in messages:
            body = {"messages": [{"content": content, "date": "2026-02-01"}]}
            answer = http.post("/v1/memory/ingest", json={**body, "session_id": session})
            assert answer.status_code == 202, answer.text
    return set(messages)


def test_export_and_import_keep_every_line_separator_and_control_character(
    served: Served, tmp_path: Path
) -> None:
    sent = ingest_every_character(served)
    first = tmp_path / "first.jsonl"
    result = run(served, "export", "--output", str(first))
    assert result.exit_code == 0, result.output
    assert held(exported(first)) == sent
    with served.http() as http:
        assert http.delete("/v1/memory").status_code == 200

    imported = run(served, "import", str(first), "--json")
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.stdout)["stored"] == len(sent)
    second = tmp_path / "second.jsonl"
    assert run(served, "export", "-o", str(second)).exit_code == 0
    assert held(exported(second)) == sent


def test_export_to_stdout_writes_one_record_per_memory(served: Served) -> None:
    sent = ingest_every_character(served)
    result = run(served, "export")
    assert result.exit_code == 0, result.output
    lines = result.stdout.split("\n")
    assert lines[-1] == ""
    assert held([json.loads(line) for line in lines[:-1]]) == sent
