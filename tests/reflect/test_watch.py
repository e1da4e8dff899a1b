"""``mcp-memoryrouter auto --watch`` as a service runs it: a real process against a real server,
checking the debt on an interval and stopping cleanly on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from mcp_memoryrouter.reflect.auto import DEFAULT_WATCH_SECONDS
from mcp_memoryrouter.reflect.cli.options import WATCH_SECONDS
from tests.support.reflect import ModelProgram, Served, wait_until

QUIET = {"REFLECT_TEST_GROUP": "100", "REFLECT_TEST_IMPORTANCE": "1"}  # little tier 2 debt
STOP_SECONDS = 5.0  # "promptly": the exit after SIGTERM, whatever the process was doing


class Lines:
    """The JSON lines a process prints, read as they come."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def next(self) -> dict[str, Any]:
        line = self._stream.readline()
        assert line, "the process ended without a line"
        body: dict[str, Any] = json.loads(line)
        return body


@pytest.fixture
def start_watch(served: Served, program: ModelProgram, home: Path) -> Iterator[Any]:
    started: list[subprocess.Popen[str]] = []

    def start(*extra: str, **env: str) -> tuple[subprocess.Popen[str], Lines]:
        args = [sys.executable, "-m", "mcp_memoryrouter", "auto", "--watch", "--json"]
        args += ["--api-url", served.url, "--model-cmd", program.command, *extra]
        environ = program.environ(
            MEMORYROUTER_HOME=str(home), MEMORYROUTER_KEY=served.key, **QUIET, **env
        )
        process = subprocess.Popen(args, env=environ, stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout is not None
        return process, Lines(process.stdout)

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


def stop(process: subprocess.Popen[str]) -> float:
    """SIGTERM; the process must exit 0. How long it took."""
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    return time.monotonic() - sent


def reflections(served: Served) -> int:
    tiers = served.stats()["tiers"]
    return int(tiers["2"]["count"]) + int(tiers["3"]["count"])


def test_watch_checks_again_on_its_interval_and_runs_when_the_server_asks(
    served: Served, start_watch: Any, home: Path
) -> None:
    served.ingest(21)
    process, lines = start_watch("--interval", "1")
    assert lines.next()["status"] == "below_threshold"
    served.ingest(1100, first=21)  # now past the threshold
    outcome = lines.next()
    while outcome["status"] == "below_threshold":  # a check may have begun before the ingest
        outcome = lines.next()
    assert (outcome["status"], outcome["batches"]) == ("ran", 1)
    assert reflections(served) > 0
    assert lines.next()["status"] == "cooling_down"  # the next check honours the cooldown
    assert stop(process) < STOP_SECONDS
    assert not (home / "consolidate.lock").exists()


def test_sigterm_while_waiting_ends_it_at_once_with_exit_0(
    served: Served, start_watch: Any
) -> None:
    process, lines = start_watch()  # the default interval: five minutes to the next check
    assert lines.next()["status"] == "nothing_to_consolidate"
    assert stop(process) < STOP_SECONDS


def test_sigterm_during_a_batch_abandons_it_and_commits_nothing(
    served: Served, start_watch: Any, program: ModelProgram, home: Path, tmp_path: Path
) -> None:
    served.ingest(1100)
    release = tmp_path / "release"  # never created: the model would wait a minute
    process, _ = start_watch(REFLECT_TEST_MODE="block", REFLECT_TEST_RELEASE=str(release))
    wait_until(program.inputs)  # inside the model call of its first batch
    assert (home / "consolidate.lock").exists()
    assert stop(process) < STOP_SECONDS
    release.touch()  # a model left running would now answer: nothing may be committed
    time.sleep(1.0)
    assert reflections(served) == 0
    debt = served.stats()["reflection"]["unconsolidated"]["raw"]
    assert debt["units"] == 1100  # all of it still waits (leased until the lease runs out)
    assert not (home / "consolidate.lock").exists()
    assert not (home / "consolidate.state").exists()  # abandoned is not completed: no cooldown
    assert "run abandoned" in (home / "consolidate.log").read_text()


def test_the_interval_the_help_shows_is_the_watch_loops_own() -> None:
    assert WATCH_SECONDS == DEFAULT_WATCH_SECONDS
