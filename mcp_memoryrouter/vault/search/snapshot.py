"""A large vector index saved to one file beside the database, and read back with room to grow.

The file is a run of ``.npy`` arrays (numpy's own format, no pickles): a JSON header (the
format's version, the strings the row columns' small ints stand for, and the caller's
``meta``), the row columns, the int8 vectors and their scales, the centroids and the lists'
entries and offsets. It is written beside the old one (0600), synced, and renamed over it,
so a reader sees the old file or the new one, never half of one. The vectors are read
straight into arrays with room to grow: a load holds them once, not a copy beside them
(~370 MiB at a million rows); a file cut short or of another shape is refused
(``ValueError``) and the caller loads from the database instead.
"""

from __future__ import annotations

import json
import os
from io import BufferedReader
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mcp_memoryrouter.private import open_private
from mcp_memoryrouter.vault.search.vectors import Saved

VERSION = 1
_COLUMNS = ("seq", "vault", "tier", "importance", "date_from", "date_to", "session", "writer")


def write(path: Path, saved: Saved, meta: dict[str, Any]) -> None:
    header = {"version": VERSION, "strings": saved.strings, "meta": meta}
    fresh = path.with_name(path.name + ".new")
    with os.fdopen(open_private(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as out:
        np.save(out, np.frombuffer(json.dumps(header).encode(), dtype=np.uint8))
        for name in _COLUMNS:
            np.save(out, saved.columns[name])
        for array in (saved.codes, saved.scales, saved.centroids, saved.order, saved.offsets):
            np.save(out, array)
        out.flush()
        os.fsync(out.fileno())
    os.replace(fresh, path)


def read(path: Path, room: int = 0) -> tuple[Saved, dict[str, Any]]:
    """The saved index and its ``meta``; its vectors have ``room`` rows more than saved
    (zero codes, unit scales), for the rows added after the start. ``OSError`` when the
    file cannot be read, ``ValueError`` when it is not a whole one of this version."""
    with open(path, "rb") as f:
        header = json.loads(_array(f).tobytes())
        if not isinstance(header, dict) or header.get("version") != VERSION:
            raise ValueError("saved vector index of another version")
        columns = {name: _array(f) for name in _COLUMNS}
        codes, scales = _array(f, room), _array(f, room, fill=1.0)
        centroids, order, offsets = _array(f), _array(f), _array(f)
    size = len(columns["seq"])
    columns["alive"] = np.ones(size, dtype=np.bool_)
    if any(len(c) != size for c in columns.values()) or len(codes) != size + room:
        raise ValueError("saved vector index of inconsistent shape")
    if len(offsets) != len(centroids) + 1 or order.size != offsets[-1]:
        raise ValueError("saved vector index of inconsistent lists")
    if order.size and (order.min() < 0 or order.max() >= size):
        raise ValueError("saved vector index of inconsistent lists")
    saved = Saved(columns, list(header["strings"]), codes, scales, centroids, order, offsets)
    return saved, dict(header["meta"])


def _array(f: BufferedReader, room: int = 0, fill: float = 0.0) -> npt.NDArray[Any]:
    """The next array of ``f``, with ``room`` rows after its own (``fill``)."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    if fortran or dtype.hasobject or not shape:
        raise ValueError("saved vector index holds an array it cannot read")
    array = np.full((shape[0] + room, *shape[1:]), fill, dtype=dtype)
    view = array[: shape[0]].reshape(-1).view(np.uint8)
    if f.readinto(view.data) != view.nbytes:
        raise ValueError("saved vector index cut short")
    return array
