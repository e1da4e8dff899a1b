"""A data directory the server's user may not write (a bind mount root made for a container
whose server runs as uid 10001) stops ``serve`` and ``keys create`` at start with a message
naming the directory, the uid the server runs as and what to do, not a traceback.

Two layouts: a data directory to create under a parent the user may not write, and one that
another user owns (0755, uid 10001, as a bind mount is for the container's user; root alone
can make it). Root, which writes anywhere, runs the command in a user namespace of its own
(``unshare --user``), where it has no power over files, as a container's user has none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

COMMANDS = [["serve", "--port", "0"], ["keys", "create"]]


def run_as_another_user(args: list[str], data_dir: Path, cache: Path) -> tuple[int, str, int]:
    """(exit code, output, the uid the command ran as)."""
    prefix: list[str] = []
    uid = os.geteuid()
    if uid == 0:
        if shutil.which("unshare") is None:
            pytest.skip("root, and no `unshare` to run as a user who cannot write everywhere")
        prefix, uid = ["unshare", "--user"], 65534  # the overflow uid, as the namespace shows
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "mcp_memoryrouter", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "MEMORYROUTER_DATA_DIR": str(data_dir),
            "MEMORYROUTER_CACHE_DIR": str(cache),
            "MEMORYROUTER_DATABASE_URL": "",
        },
    )
    return done.returncode, done.stdout + done.stderr, uid


def missing_under_a_read_only_parent(tmp_path: Path) -> Path:
    parent = tmp_path / "mnt"
    parent.mkdir(mode=0o555)
    return parent / "data"


def owned_by_another_user(tmp_path: Path) -> Path:
    """A root-owned bind mount, as uid 10001 sees it; only root can make one."""
    if os.geteuid() != 0:
        pytest.skip("only root can give a directory to another user")
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    os.chown(data_dir, 10001, 10001)
    return data_dir


LAYOUTS = [missing_under_a_read_only_parent, owned_by_another_user]


@pytest.mark.parametrize("layout", LAYOUTS, ids=[layout.__name__ for layout in LAYOUTS])
@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a[:2]) for a in COMMANDS])
def test_a_data_dir_the_server_cannot_write_stops_it_with_the_path_uid_and_remedy(
    tmp_path: Path, args: list[str], layout: Callable[[Path], Path]
) -> None:
    data_dir = layout(tmp_path)
    code, output, uid = run_as_another_user(args, data_dir, tmp_path / "cache")
    assert code == 1, output
    assert "Traceback" not in output, output
    assert str(data_dir) in output
    assert f"uid {uid}" in output
    assert f"chown -R {uid} {data_dir}" in output
    assert not data_dir.exists() or list(data_dir.iterdir()) == []
