"""Secrets the authorization server keeps in the data directory, each in its own 0600 file."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def read_or_create(path: Path, make: Callable[[], bytes]) -> bytes:
    """The file's bytes; on first use ``make()`` them and write them readable by the owner only.

    ``O_EXCL`` makes two processes starting at once agree on one secret: the loser reads it.
    """
    if path.exists():
        return path.read_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()
    data = make()
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return data
