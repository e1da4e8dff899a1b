"""One serving process per SQLite vault (see ``vault/store/sqlite/owner.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from mcp_memoryrouter.vault.store.sqlite.owner import StoreInUse


def test_a_serving_store_claims_its_file_until_it_closes(tmp_path: Path) -> None:
    path = tmp_path / "vault.sqlite3"
    first = SQLiteStore(path, serving=True)
    with pytest.raises(StoreInUse, match=f"already served by process {os.getpid()}"):
        SQLiteStore(path, serving=True)
    # A store opened for a moment (keys create, migrate) is not a server: it opens beside it.
    SQLiteStore(path).close()
    # Another vault file is another claim.
    SQLiteStore(tmp_path / "other.sqlite3", serving=True).close()
    first.close()
    SQLiteStore(path, serving=True).close()
