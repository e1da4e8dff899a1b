"""The machine-wide consolidation directory, ``~/.memoryrouter`` by default.

Every connector on the machine shares it::

    config.json          {"autoConsolidate": false} opts out of automatic consolidation
    consolidate.lock     held while a run is in progress (see :mod:`reflect.lock`)
    consolidate.state    {"last_completed": <unix seconds>}: the cooldown's reference
    consolidate.log      what automatic runs did and why they failed

``MEMORYROUTER_HOME`` (or a constructor argument) points elsewhere, for tests. The directory
is 0700 and every file written in it 0600, whatever the umask: the log names vaults and
errors.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from mcp_memoryrouter.private import open_private, private_dir

LOG_ROTATE_BYTES = 1_048_576

Clock = Callable[[], float]  # unix seconds


def default_home() -> Path:
    """Where the loop keeps its state unless ``--home`` (MEMORYROUTER_HOME) says otherwise."""
    return Path.home() / ".memoryrouter"


@dataclass(frozen=True)
class Home:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def lock(self) -> Path:
        return self.root / "consolidate.lock"

    @property
    def state(self) -> Path:
        return self.root / "consolidate.state"

    @property
    def log(self) -> Path:
        return self.root / "consolidate.log"

    def auto_consolidate(self) -> bool:
        """False when ``config.json`` says ``"autoConsolidate": false``.

        A malformed file raises :class:`ValueError` naming why; callers treat it as an
        opt-out, since a broken opt-out must not spend the user's inference.
        """
        try:
            text = self.config.read_text(encoding="utf-8")
        except FileNotFoundError:
            return True
        config = json.loads(text)  # ValueError on a malformed file
        if not isinstance(config, dict):
            raise ValueError(f"{self.config} must hold a JSON object")
        flag = config.get("autoConsolidate", True)
        if not isinstance(flag, bool):
            raise ValueError(f"autoConsolidate in {self.config} must be true or false")
        return flag

    def last_completed(self) -> float | None:
        try:
            state = json.loads(self.state.read_text(encoding="utf-8"))
            value = state["last_completed"]
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return None
        return float(value) if isinstance(value, int | float) else None

    def record_completed(self, when: float) -> None:
        """Replace the state file in one step, so a reader never sees half of it."""
        private_dir(self.root)
        temporary = self.state.with_name(f"{self.state.name}.{os.getpid()}.tmp")
        fd = open_private(temporary, os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(json.dumps({"last_completed": when}))
        os.replace(temporary, self.state)


class RunLog:
    """Appends one line per event to ``consolidate.log``; never raises."""

    def __init__(self, path: Path, clock: Clock) -> None:
        self._path = path
        self._clock = clock

    def write(self, message: str) -> None:
        stamp = datetime.fromtimestamp(self._clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            private_dir(self._path.parent)
            if self._path.exists() and self._path.stat().st_size > LOG_ROTATE_BYTES:
                os.replace(self._path, self._path.with_name(self._path.name + ".1"))
            fd = open_private(self._path, os.O_CREAT | os.O_WRONLY | os.O_APPEND)
            with os.fdopen(fd, "a", encoding="utf-8") as log:
                log.write(f"{stamp} pid={os.getpid()} {message}\n")
        except OSError:
            pass  # the log is best effort: a full disk must not reach the caller
