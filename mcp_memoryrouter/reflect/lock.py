"""The machine-wide consolidation lock: one run at a time across sessions and connectors.

Acquiring is one atomic ``os.open(O_CREAT | O_EXCL)``; the file holds the holder's pid and
a timestamp. A lock older than 20 minutes is stale (its holder died or hung) and is taken
over. Taking over, refreshing and releasing an *existing* lock file happen under an
``flock`` on a side file, so two processes that both find the same stale lock cannot both
end up holding it, and a slow holder cannot delete its successor's lock.

The directory is 0700 and the lock and guard files 0600, whatever the umask.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

from mcp_memoryrouter.private import open_private, private_dir
from mcp_memoryrouter.reflect.home import Clock

STALE_AFTER_SECONDS = 20 * 60


class MachineLock:
    def __init__(
        self, path: Path, clock: Clock, *, stale_after: float = STALE_AFTER_SECONDS
    ) -> None:
        self._path = path
        self._guard_path = path.with_name(path.name + ".guard")
        self._clock = clock
        self._stale_after = stale_after
        self._content: str | None = None  # what this holder wrote, to recognise its lock

    @property
    def held(self) -> bool:
        return self._content is not None

    def acquire(self) -> bool:
        """True when this process now holds the lock (fresh, or taken over from a stale one)."""
        private_dir(self._path.parent)
        if self._create():
            return True
        with self._guard():
            age = self._age()
            if age is not None and age < self._stale_after:
                return False
            with contextlib.suppress(FileNotFoundError):
                self._path.unlink()
            return self._create()

    def refresh(self) -> None:
        """Move the timestamp forward, so a long run is not mistaken for a dead one."""
        with self._guard():
            if self._content is not None and self._read() == self._content:
                self._content = self._stamp()
                self._path.write_text(self._content, encoding="utf-8")

    def release(self) -> None:
        with self._guard():
            if self._content is not None and self._read() == self._content:
                self._path.unlink()
        self._content = None

    # --- plumbing ----------------------------------------------------------------------

    def _stamp(self) -> str:
        # The token tells apart two holders that share a pid and a clock reading.
        token = secrets.token_hex(8)
        return json.dumps({"pid": os.getpid(), "timestamp": self._clock(), "token": token})

    def _create(self) -> bool:
        content = self._stamp()
        try:
            fd = open_private(self._path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(content)
        self._content = content
        return True

    def _read(self) -> str | None:
        try:
            return self._path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def _age(self) -> float | None:
        """Seconds since the holder stamped the lock; None when there is no lock.

        A lock whose content cannot be read (its creator is between ``open`` and ``write``,
        or died there) is dated by its modification time.
        """
        content = self._read()
        if content is None:
            return None
        try:
            stamped = float(json.loads(content)["timestamp"])
        except (ValueError, KeyError, TypeError):
            try:
                stamped = self._path.stat().st_mtime
            except FileNotFoundError:
                return None
        return self._clock() - stamped

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        fd = open_private(self._guard_path, os.O_CREAT | os.O_WRONLY | os.O_APPEND)
        with os.fdopen(fd, "a") as guard:
            fcntl.flock(guard, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(guard, fcntl.LOCK_UN)
