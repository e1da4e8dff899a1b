"""The machine-wide lock, the cooldown state and the run log."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_memoryrouter.reflect.home import Home, RunLog, default_home
from mcp_memoryrouter.reflect.lock import MachineLock
from tests.support.reflect import Seconds

MINUTE = 60.0


def test_the_lock_file_holds_the_pid_and_a_timestamp_and_admits_one_holder(
    tmp_path: Path,
) -> None:
    clock = Seconds()
    path = tmp_path / "consolidate.lock"
    first, second = MachineLock(path, clock), MachineLock(path, clock)
    assert first.acquire()
    content = json.loads(path.read_text())
    assert content["pid"] == os.getpid() and content["timestamp"] == clock()
    assert not second.acquire()
    first.release()
    assert not path.exists()
    assert second.acquire()


def test_a_stale_lock_is_taken_over_and_its_old_holder_cannot_release_the_new_one(
    tmp_path: Path,
) -> None:
    clock = Seconds()
    path = tmp_path / "consolidate.lock"
    slow, successor = MachineLock(path, clock), MachineLock(path, clock)
    assert slow.acquire()
    clock.advance(19 * MINUTE)
    assert not successor.acquire()
    clock.advance(2 * MINUTE)
    assert successor.acquire()
    slow.release()  # the old holder wakes up and lets go of what it thinks is its lock
    assert path.exists() and successor.held
    assert not MachineLock(path, clock).acquire()


def test_refreshing_the_lock_keeps_a_long_run_from_looking_dead(tmp_path: Path) -> None:
    clock = Seconds()
    path = tmp_path / "consolidate.lock"
    holder = MachineLock(path, clock)
    assert holder.acquire()
    clock.advance(15 * MINUTE)
    holder.refresh()
    clock.advance(15 * MINUTE)
    assert not MachineLock(path, clock).acquire()


def test_an_unreadable_lock_is_dated_by_its_modification_time(tmp_path: Path) -> None:
    path = tmp_path / "consolidate.lock"
    path.write_text("")  # a holder that died between creating and writing the file
    mtime = path.stat().st_mtime
    assert not MachineLock(path, Seconds(mtime + 19 * MINUTE)).acquire()
    assert MachineLock(path, Seconds(mtime + 21 * MINUTE)).acquire()


def test_the_cooldown_state_survives_a_torn_or_missing_file(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    assert home.last_completed() is None
    home.record_completed(1234.5)
    assert home.last_completed() == 1234.5
    home.state.write_text('{"last_completed": ')
    assert home.last_completed() is None


def test_the_default_home_is_in_the_home_directory() -> None:
    assert default_home() == Path.home() / ".memoryrouter"


def test_the_run_log_never_raises(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    RunLog(blocked / "consolidate.log", Seconds()).write("cannot be written")  # no error
    log = RunLog(tmp_path / "consolidate.log", Seconds())
    log.write("batch committed")
    assert (tmp_path / "consolidate.log").read_text().startswith("2026-01-01T00:00:00Z pid=")


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_consolidation_directory_and_its_files_are_the_users_alone_whatever_the_umask(
    tmp_path: Path, permissive_umask: None
) -> None:
    clock = Seconds()
    home = Home(tmp_path / "home")
    holder = MachineLock(home.lock, clock)
    assert holder.acquire()
    holder.refresh()
    home.record_completed(clock())
    RunLog(home.log, clock).write("batch committed")
    assert mode(home.root) == 0o700
    files = sorted(home.root.iterdir())
    assert {path.name for path in files} >= {
        "consolidate.lock",
        "consolidate.lock.guard",
        "consolidate.state",
        "consolidate.log",
    }
    assert {path.name: mode(path) for path in files} == {path.name: 0o600 for path in files}


def test_a_run_log_an_earlier_version_left_readable_is_narrowed(
    tmp_path: Path, permissive_umask: None
) -> None:
    log = tmp_path / "consolidate.log"
    log.write_text("")
    log.chmod(0o644)
    RunLog(log, Seconds()).write("batch committed")
    assert mode(log) == 0o600
