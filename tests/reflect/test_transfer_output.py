"""What ``import`` and ``export`` print: counts whose words agree with their numbers, no
progress label off a terminal (a log or a pipe gets the result lines alone), and a JSON
error that says where once."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from mcp_memoryrouter.cli import main
from tests.support.reflect import Served


def run(served: Served, *args: str) -> Result:
    return CliRunner().invoke(
        main, [*args, "--api-url", served.url], env={"MEMORYROUTER_KEY": served.key}
    )


def lines(path: Path, *records: object) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_off_a_terminal_import_and_export_print_no_progress_label(
    served: Served, tmp_path: Path
) -> None:
    path = lines(tmp_path / "in.jsonl", {"content": "One.", "date": "2026-02-01"})
    imported = run(served, "import", str(path))
    assert imported.exit_code == 0, imported.output
    assert imported.stderr == ""
    exported = run(served, "export")
    assert exported.exit_code == 0, exported.output
    assert exported.stderr == "exported 1 memory\n"
    to_file = run(served, "export", "-o", str(tmp_path / "out.jsonl"))
    assert to_file.stderr == f"exported 1 memory to {tmp_path / 'out.jsonl'}\n"


def test_one_of_a_kind_is_counted_in_the_singular(served: Served, tmp_path: Path) -> None:
    one = lines(tmp_path / "one.jsonl", {"content": "One.", "date": "2026-02-01"})
    run(served, "import", str(one))
    again = run(served, "import", str(one))
    assert again.stdout == (
        "imported 0 memories (1 duplicate), 0 reflections (0 of tier 2, 0 of tier 3)\n"
    )
    history = tmp_path / "conversations.json"
    history.write_text(
        json.dumps(
            [
                {
                    "uuid": "c1",
                    "created_at": "2024-05-02T09:00:00Z",
                    "chat_messages": [
                        {"sender": "human", "text": "Hello.", "files": [{"file_name": "a.png"}]},
                        {"sender": "tool", "text": "ignored"},
                    ],
                }
            ]
        ),
        encoding="utf-8",
    )
    imported = run(served, "import", "--from", "claude", str(history))
    assert imported.stdout == (
        "imported 1 message from 1 conversation (0 duplicates, 1 attachment skipped, "
        "1 system/tool message skipped)\n"
    )


def test_a_json_error_names_where_it_is_once(served: Served, tmp_path: Path) -> None:
    archive = tmp_path / "in.jsonl"
    archive.write_text('{"content": "a\tb"}\n', encoding="utf-8")  # a raw tab in a string
    refused = run(served, "import", str(archive))
    assert refused.exit_code == 1
    assert "Invalid control character at column" in refused.output
    assert "at at" not in refused.output
    history = tmp_path / "conversations.json"
    history.write_text('[{"uuid": "a\tb"}]', encoding="utf-8")
    refused = run(served, "import", "--from", "claude", str(history))
    assert refused.exit_code == 1
    assert "Invalid control character at line 1 column" in refused.output
    assert "at at" not in refused.output
