"""Files only the server's own user may read: the data directory is 0700 and every file the
server keeps in it 0600, whatever the process umask.

Modes are set per file, not by changing the process umask. A SQLite database file is created
0600 before its first connection, because SQLite gives its ``-wal`` and ``-shm`` files the
database file's mode. Files and the data directory left wider by an earlier version are
narrowed when the server opens them.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from mcp_memoryrouter.errors import ConfigError

DIR_MODE = 0o700
FILE_MODE = 0o600
_SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> None:
    """Create ``path`` (0700), or narrow it to 0700 when it exists."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    _narrow(path, DIR_MODE)


def writable_data_dir(path: Path) -> None:
    """Ready the data directory as :func:`private_dir` does, refusing to start, with what to
    do, when this process may not write in it: a bind mount that root made for a container
    whose server runs as another user would otherwise fail later on its first file."""
    try:
        private_dir(path)
    except PermissionError as exc:
        raise ConfigError(_not_writable(path)) from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(_not_writable(path))


def _not_writable(path: Path) -> str:
    uid = os.geteuid()
    try:
        owner = f" (it belongs to uid {os.stat(path).st_uid})"
    except OSError:
        owner = ""
    return (
        f"the data directory {path} (MEMORYROUTER_DATA_DIR) is not writable by uid {uid}, "
        f"the user this server runs as{owner}: give it to that user (`chown -R {uid} "
        f"{path}`, on the host for a bind mount), run the server as the directory's owner "
        "(`--user` for a container), or point MEMORYROUTER_DATA_DIR at a directory it may "
        "write"
    )


def new_private_dir(path: Path) -> None:
    """Create ``path`` 0700 if it is missing; an existing directory is left as it is (it
    may be shared, such as the parent of a database file placed elsewhere)."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)


def open_private(path: Path | str, flags: int) -> int:
    """``os.open`` creating the file 0600; an existing file is narrowed to 0600."""
    fd = os.open(path, flags, FILE_MODE)
    with contextlib.suppress(PermissionError):
        os.fchmod(fd, FILE_MODE)
    return fd


def private_file(path: Path | str) -> None:
    """Create ``path`` empty (0600) if it is missing, or narrow it to 0600."""
    os.close(open_private(path, os.O_RDONLY | os.O_CREAT))


def private_database(path: Path | str) -> None:
    """Ready a SQLite database file so that it and its WAL, shared-memory and journal
    files are 0600 (call before connecting)."""
    private_file(path)
    for suffix in _SQLITE_COMPANIONS:
        companion = Path(f"{path}{suffix}")
        if companion.exists():
            _narrow(companion, FILE_MODE)


def _narrow(path: Path, mode: int) -> None:
    # a file another user owns (a read-only deployment) is left alone
    with contextlib.suppress(PermissionError):
        os.chmod(path, mode)
