"""One serving process per SQLite vault.

A serving SQLite store keeps its lexical and vector indexes in memory and keeps them in step
with its own writes only; a second process writing the same file would store memories the
first one never finds until it restarts. So a serving store claims the file: an exclusive
``flock`` on ``<file>.owner`` (holding the owner's process id, for the message), released
when the store closes or the process ends, even by ``kill -9``. Commands that only open the
store for a moment (``keys create``, ``migrate``) do not claim it.
"""

from __future__ import annotations

import fcntl
import os
from typing import IO

from mcp_memoryrouter.errors import StartupError
from mcp_memoryrouter.private import open_private


class StoreInUse(StartupError):
    """Another process serves this SQLite vault."""

    def __init__(self, path: str, pid: str) -> None:
        self.pid = pid
        owner = f"process {pid}" if pid else "another process"
        super().__init__(
            f"{path} is already served by {owner}: one process serves a SQLite vault, since "
            "its search indexes live in that process. Stop it, point this one at it with "
            "MEMORYROUTER_API_URL=http://127.0.0.1:<its port>, or use another "
            "MEMORYROUTER_DATA_DIR."
        )


def claim(path: str) -> IO[str]:
    """Hold ``path``'s owner lock for as long as the returned file stays open."""
    fd = open_private(f"{path}.owner", os.O_RDWR | os.O_CREAT)
    handle = open(fd, "r+", encoding="utf-8")  # noqa: SIM115 (held open)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        pid = handle.read().strip()
        handle.close()
        raise StoreInUse(path, pid) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle
