"""A large vector index saved to one file beside the database, and read back with room to grow.

The file is an uncompressed ``.npz`` (numpy's zip of ``.npy`` arrays): the saved rows'
columns, their int8 vectors and scales, the lists' centroids, entries and offsets, and a
JSON header with the strings the columns' small ints stand for and the caller's ``meta``.
It is written beside the old one (0600) and renamed over it, so a reader sees the old file
or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from mcp_memoryrouter.private import open_private
from mcp_memoryrouter.vault.search.vectors import Saved

_COLUMN = "column_"


def write(path: Path, saved: Saved, meta: dict[str, Any]) -> None:
    header = json.dumps({"strings": saved.strings, "meta": meta}).encode()
    arrays = {f"{_COLUMN}{name}": column for name, column in saved.columns.items()}
    arrays.update(
        codes=saved.codes,
        scales=saved.scales,
        centroids=saved.centroids,
        order=saved.order,
        offsets=saved.offsets,
        header=np.frombuffer(header, dtype=np.uint8),
    )
    fresh = path.with_name(path.name + ".new")
    with os.fdopen(open_private(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as out:
        np.savez(out, allow_pickle=False, **arrays)
    os.replace(fresh, path)


def read(path: Path, room: int = 0) -> tuple[Saved, dict[str, Any]]:
    """The saved index and its ``meta``; its vectors have ``room`` rows more than saved
    (zero codes, unit scales), for the rows added after the start."""
    with np.load(path, allow_pickle=False) as data:
        header = json.loads(data["header"].tobytes())
        columns = {
            name[len(_COLUMN) :]: data[name] for name in data.files if name.startswith(_COLUMN)
        }
        saved_codes, saved_scales = data["codes"], data["scales"]
        size = len(saved_scales)
        codes = np.zeros((size + room, saved_codes.shape[1]), dtype=np.int8)
        scales = np.ones(size + room, dtype=np.float32)
        codes[:size], scales[:size] = saved_codes, saved_scales
        saved = Saved(
            columns,
            list(header["strings"]),
            codes,
            scales,
            data["centroids"],
            data["order"],
            data["offsets"],
        )
    return saved, dict(header["meta"])
