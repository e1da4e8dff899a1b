"""``export --output``: the vault on disk is its owner's alone, and export never writes
through a symbolic link someone planted at the file or at its temporary file."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mcp_memoryrouter.cli import main
from tests.support.reflect import Served

SECRET = "The locker code is 4417."


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Where the export goes (the vault's own files are in ``tmp_path``)."""
    made = tmp_path / "exports"
    made.mkdir()
    return made


def export_to(served: Served, output: Path) -> Result:
    with served.http() as http:
        body = {"messages": [{"content": SECRET, "date": "2026-02-01"}]}
        assert http.post("/v1/memory/ingest", json=body).status_code == 202
    return CliRunner().invoke(
        main,
        ["export", "--output", str(output), "--api-url", served.url],
        env={"MEMORYROUTER_KEY": served.key},
    )


def test_the_exported_file_is_0600_under_a_permissive_umask_even_replacing_a_wider_one(
    served: Served, folder: Path, permissive_umask: None
) -> None:
    output = folder / "vault.jsonl"
    output.write_text("an older export\n")
    output.chmod(0o644)
    result = export_to(served, output)
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(output.stat().st_mode) == 0o600
    assert SECRET in output.read_text(encoding="utf-8")
    assert sorted(p.name for p in folder.iterdir()) == ["vault.jsonl"]


def test_a_symbolic_link_at_the_output_is_refused_and_left_alone(
    served: Served, folder: Path
) -> None:
    victim = folder / "elsewhere.txt"
    victim.write_text("keep me\n")
    output = folder / "vault.jsonl"
    output.symlink_to(victim)
    result = export_to(served, output)
    assert result.exit_code == 1
    assert str(output) in result.output and "Traceback" not in result.output
    assert output.is_symlink() and victim.read_text() == "keep me\n"
    assert not (folder / "vault.jsonl.partial").exists()


@pytest.mark.parametrize("target_exists", [True, False])
def test_a_symbolic_link_at_the_temporary_file_is_refused_and_never_followed(
    served: Served, folder: Path, target_exists: bool
) -> None:
    victim = folder / "elsewhere.txt"
    if target_exists:
        victim.write_text("keep me\n")
    output = folder / "vault.jsonl"
    partial = folder / "vault.jsonl.partial"
    partial.symlink_to(victim)
    result = export_to(served, output)
    assert result.exit_code == 1
    assert str(partial) in result.output and "Traceback" not in result.output
    assert partial.is_symlink() and not output.exists()
    if target_exists:
        assert victim.read_text() == "keep me\n"
    else:
        assert not victim.exists()


def test_a_leftover_temporary_file_is_refused_and_left_for_its_owner(
    served: Served, folder: Path
) -> None:
    partial = folder / "vault.jsonl.partial"
    partial.write_text("half an export\n")
    result = export_to(served, folder / "vault.jsonl")
    assert result.exit_code == 1
    assert str(partial) in result.output
    assert partial.read_text() == "half an export\n"
