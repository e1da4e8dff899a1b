"""The BM25 index saved to a directory and opened again with its postings memory-mapped, so a
restart reads the index's arrays instead of every token occurrence of the vault.

A snapshot holds the live rows only (as a compaction would leave them): the row table's
columns and the strings its codes stand for, each row's length, and per vault its
statistics and segment (the vocabulary's blob and ends, ``starts``, ``positions``,
``counts``, ``peaks`` as ``.npy`` files; ``positions`` and ``counts`` open memory-mapped, so
the pages of a token nobody asks for need not be resident). ``meta`` is the caller's: what
it needs to tell whether the snapshot still describes its rows (the store keeps the largest
seq, that row's id and the tokenizer). The directory is written beside the old one and
swapped in, every file private (0600).
"""

from __future__ import annotations

import json
import os
import shutil
from array import array
from pathlib import Path
from typing import Any

import numpy as np

from mcp_memoryrouter.private import new_private_dir, open_private
from mcp_memoryrouter.vault.search.lexical import BM25, Bm25, LexicalIndex, _Vault
from mcp_memoryrouter.vault.search.postings import Segment, Vocabulary
from mcp_memoryrouter.vault.search.rowtable import RowTable
from mcp_memoryrouter.vault.search.seqs import SeqPositions

FORMAT = 1
_ARRAYS = ("starts", "positions", "counts", "peaks")
_MAPPED = ("positions", "counts")


def save(index: LexicalIndex, directory: Path, meta: dict[str, Any]) -> None:
    """Write the index's live rows to ``directory`` (replaced whole). The caller keeps the
    index from changing meanwhile (the store holds its writer lock)."""
    with index._lock:  # the module is the index's own persistence: it reads its parts
        rows = index._rows
        alive = np.flatnonzero(rows.columns["alive"][: rows.size])
        moved = np.full(rows.size, -1, dtype=np.int64)
        moved[alive] = np.arange(alive.size)
        vaults = {
            code: (v.segment.merged(v.tail).moved(moved), v.rows, v.tokens)
            for code, v in index._vaults.items()
            if v.rows
        }
        columns = {name: column[alive] for name, column in rows.columns.items()}
        strings = list(rows._codes)
        length = index._length[alive]
    fresh = directory.with_name(directory.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    new_private_dir(fresh)
    for name, column in columns.items():
        _write(fresh / f"row_{name}.npy", column)
    _write(fresh / "length.npy", length)
    for code, (segment, _, _) in vaults.items():
        for name in _ARRAYS:
            _write(fresh / f"v{code}_{name}.npy", getattr(segment, name))
        _write_bytes(fresh / f"v{code}_blob", segment.vocabulary.blob)
        _write_bytes(fresh / f"v{code}_ends", segment.vocabulary.ends.tobytes())
    manifest = {
        "format": FORMAT,
        "strings": strings,
        "vaults": {str(code): [rows_, tokens] for code, (_, rows_, tokens) in vaults.items()},
        "meta": meta,
    }
    _write_bytes(fresh / "manifest.json", json.dumps(manifest).encode())  # written last
    old = directory.with_name(directory.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if directory.exists():
        directory.rename(old)
    fresh.rename(directory)
    shutil.rmtree(old, ignore_errors=True)  # maps of it stay valid until they are dropped


def load(directory: Path, params: Bm25 = BM25) -> tuple[LexicalIndex, dict[str, Any]] | None:
    """The index saved in ``directory`` and its ``meta``; None when there is none, or one of
    another format."""
    try:
        manifest = json.loads((directory / "manifest.json").read_bytes())
    except (OSError, ValueError):
        return None
    if manifest.get("format") != FORMAT:
        return None
    index = LexicalIndex(params)
    columns = {name: np.load(directory / f"row_{name}.npy") for name in index._rows.columns}
    size = len(columns["seq"])
    table = RowTable(max(1024, size))
    for name, column in columns.items():
        table.columns[name][:size] = column
    table.size = table.live = size
    table._codes = {value: code for code, value in enumerate(manifest["strings"])}
    table.where = SeqPositions.of(columns["seq"], np.arange(size))
    index._rows = table
    index._length = np.zeros(table.capacity, dtype=np.uint32)
    index._length[:size] = np.load(directory / "length.npy")
    for key, (rows, tokens) in manifest["vaults"].items():
        code = int(key)
        arrays = {n: _open(directory / f"v{code}_{n}.npy", n in _MAPPED) for n in _ARRAYS}
        ends = array("q")
        ends.frombytes((directory / f"v{code}_ends").read_bytes())
        vocabulary = Vocabulary((directory / f"v{code}_blob").read_bytes(), ends)
        segment = Segment(vocabulary, **arrays)
        index._vaults[code] = _Vault(segment=segment, rows=rows, tokens=tokens)
    return index, manifest["meta"]


def _open(path: Path, mapped: bool) -> np.ndarray[Any, Any]:
    """The array saved at ``path``; memory-mapped as a plain array when ``mapped`` (a
    ``np.memmap`` slices through Python code: a search takes thousands of slices)."""
    array: np.ndarray[Any, Any] = (
        np.load(path, mmap_mode="r").view(np.ndarray) if mapped else np.load(path)
    )
    return array


def _write(path: Path, values: np.ndarray[Any, Any]) -> None:
    with os.fdopen(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as out:
        np.save(out, np.ascontiguousarray(values), allow_pickle=False)


def _write_bytes(path: Path, data: bytes) -> None:
    with os.fdopen(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as out:
        out.write(data)
