"""Secrets the authorization server keeps in the data directory, each in its own 0600 file."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from mcp_memoryrouter.private import FILE_MODE, new_private_dir, private_file


def read_or_create(path: Path, make: Callable[[], bytes]) -> bytes:
    """The file's bytes; on first use ``make()`` them and write them readable by the owner only.

    ``O_EXCL`` makes two processes starting at once agree on one secret: the loser reads it.
    """
    if path.exists():
        private_file(path)  # narrowed if an earlier version left it wider
        return path.read_bytes()
    new_private_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return path.read_bytes()
    data = make()
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return data
