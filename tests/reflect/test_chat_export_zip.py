"""``import --from chatgpt|claude export.zip``: the zip the service sends, read in memory.

The zips are built here with the members each service puts in its export (ChatGPT:
conversations.json, chat.html, user.json, message_feedback.json and the attachments;
Claude: conversations.json, users.json, projects.json), around the same conversations as
``test_history_import``. Nothing inside a zip ever becomes a path on the disk, and sizes
are checked before anything is decompressed.
"""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mcp_memoryrouter.cli import main
from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.transfer.chat_export import Caps, read_export
from tests.support.reflect import (
    CHATGPT_STORED,
    CLAUDE,
    CLAUDE_STORED,
    PNG,
    Served,
    build_zip,
    chatgpt_zip,
    stored,
)


def claude_zip(path: Path) -> Path:
    return build_zip(
        path,
        {
            "users.json": b'[{"uuid": "u-1", "full_name": "Ana"}]',
            "projects.json": b"[]",
            "conversations.json": CLAUDE.read_bytes(),
        },
    )


def run(served: Served, *args: str) -> Result:
    return CliRunner().invoke(
        main, ["import", *args, "--api-url", served.url], env={"MEMORYROUTER_KEY": served.key}
    )


def test_chatgpts_export_zip_is_imported_as_its_conversations_json_is(
    served: Served, tmp_path: Path
) -> None:
    result = run(served, "--from", "chatgpt", str(chatgpt_zip(tmp_path / "export.zip")))
    assert result.exit_code == 0, result.output
    assert stored(served) == CHATGPT_STORED


def test_claudes_export_zip_is_imported_as_its_conversations_json_is(
    served: Served, tmp_path: Path
) -> None:
    result = run(served, "--from", "claude", str(claude_zip(tmp_path / "data.zip")))
    assert result.exit_code == 0, result.output
    assert stored(served) == CLAUDE_STORED


def test_an_export_unpacked_and_zipped_again_in_its_folder_is_read_too(tmp_path: Path) -> None:
    path = build_zip(
        tmp_path / "again.zip",
        {"export/users.json": b"[]", "export/conversations.json": CLAUDE.read_bytes()},
    )
    assert read_export(path, "claude").size == len(CLAUDE_STORED)


def test_names_that_climb_out_of_the_zip_touch_nothing_on_the_disk(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    evil = {
        "../evil": b"#!/bin/sh\necho owned\n",
        "../../evil.json": b"[]",
        "/tmp/evil-absolute": b"x",
        "..\\evil-windows": b"x",
    }
    path = chatgpt_zip(work / "export.zip", **evil)
    before = sorted(tmp_path.rglob("*"))
    result = run(served, "--from", "chatgpt", str(path))
    assert result.exit_code == 0, result.output
    assert stored(served) == CHATGPT_STORED
    assert sorted(tmp_path.rglob("*")) == before
    assert not Path("/tmp/evil-absolute").exists()


def test_a_conversations_json_outside_the_zip_is_no_candidate(tmp_path: Path) -> None:
    for name in ("../conversations.json", "/conversations.json", "a/b/conversations.json"):
        path = build_zip(tmp_path / "outside.zip", {name: CLAUDE.read_bytes()})
        with pytest.raises(InvalidRequest) as refused:
            read_export(path, "claude")
        assert refused.value.details == {"refused": "no_conversations"}


def test_a_zip_without_conversations_json_is_refused_naming_what_it_holds(
    served: Served, tmp_path: Path
) -> None:
    path = build_zip(tmp_path / "photos.zip", {"IMG_0001.png": PNG})
    result = run(served, "--from", "chatgpt", str(path))
    assert result.exit_code == 1
    assert "no conversations.json" in result.output and "IMG_0001.png" in result.output
    assert served.stats()["total_memories"] == 0


def test_names_inside_the_zip_are_shown_with_their_control_characters_visible(
    tmp_path: Path,
) -> None:
    path = build_zip(tmp_path / "odd.zip", {"\x1b]52;c;cHduZWQ=\x07.png": PNG})
    with pytest.raises(InvalidRequest) as refused:
        read_export(path, "chatgpt")
    assert "\x1b" not in refused.value.message and "\x07" not in refused.value.message
    assert "<U+001B>]52;c;cHduZWQ=<U+0007>.png" in refused.value.message


def test_a_file_neither_zip_nor_utf8_is_refused_cleanly(served: Served, tmp_path: Path) -> None:
    path = tmp_path / "export.zip"
    path.write_bytes(b"\xff\xfe\x00garbage" + PNG)
    result = run(served, "--from", "chatgpt", str(path))
    assert result.exit_code == 1
    assert "neither a zip nor UTF-8" in result.output
    assert "Traceback" not in result.output and "UnicodeDecodeError" not in result.output


def test_a_zip_given_without_from_gets_the_hint(served: Served, tmp_path: Path) -> None:
    result = run(served, str(chatgpt_zip(tmp_path / "export.zip")))
    assert result.exit_code == 1
    assert "--from chatgpt" in result.output and "UnicodeDecodeError" not in result.output


# --- sizes, checked before anything is decompressed ----------------------------------------


def bomb(path: Path, megabytes: int) -> Path:
    """A conversations.json of ``megabytes`` of spaces: a few KiB compressed."""
    return build_zip(path, {"conversations.json": b"[" + b" " * (megabytes << 20) + b"]"})


def test_a_member_larger_than_its_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = bomb(tmp_path / "bomb.zip", 64)
    assert path.stat().st_size < 1 << 20
    with pytest.raises(InvalidRequest) as refused:
        read_export(path, "chatgpt", Caps(member_bytes=8 << 20))
    assert refused.value.details == {"refused": "too_large"}
    assert "unzip it" in refused.value.message


def test_a_zip_whose_members_declare_too_much_in_all_is_refused(tmp_path: Path) -> None:
    members = {f"file-{n}.png": b"\0" * (4 << 20) for n in range(8)}
    path = build_zip(tmp_path / "many.zip", {**members, "conversations.json": b"[]"})
    with pytest.raises(InvalidRequest) as refused:
        read_export(path, "chatgpt", Caps(total_bytes=16 << 20))
    assert refused.value.details == {"refused": "zip_bomb"}


def test_a_zip_file_larger_than_its_cap_is_refused(tmp_path: Path) -> None:
    path = chatgpt_zip(tmp_path / "export.zip")
    with pytest.raises(InvalidRequest) as refused:
        read_export(path, "chatgpt", Caps(zip_bytes=path.stat().st_size - 1))
    assert refused.value.details == {"refused": "zip_too_large"}


def test_a_member_that_lies_about_its_size_is_read_no_further_than_it_says(
    tmp_path: Path,
) -> None:
    """The local and central headers say 2 bytes; the data inflates to 16 MiB."""
    data = bytearray(bomb(tmp_path / "liar.zip", 16).read_bytes())
    local = data.index(b"PK\x03\x04")
    central = data.index(b"PK\x01\x02")
    struct.pack_into("<I", data, local + 22, 2)
    struct.pack_into("<I", data, central + 24, 2)
    path = tmp_path / "liar.zip"
    path.write_bytes(bytes(data))
    with pytest.raises(InvalidRequest) as refused:
        read_export(path, "chatgpt", Caps(member_bytes=1 << 20))
    assert refused.value.details == {"refused": "damaged"}


def test_nothing_is_extracted_when_reading_a_zip(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("conversations.json", json.dumps([]))
        archive.writestr("../../escaped.txt", "x")
    path = tmp_path / "inner" / "export.zip"
    path.parent.mkdir()
    path.write_bytes(buffer.getvalue())
    before = set(os.listdir(tmp_path))
    assert read_export(path, "claude").size == 0
    assert set(os.listdir(tmp_path)) == before and os.listdir(path.parent) == ["export.zip"]
