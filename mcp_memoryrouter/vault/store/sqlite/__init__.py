"""The SQLite store (the embedded default): what only SQLite does, beside the use cases
written once in :mod:`..base` (connections, the dialect's ``Tx`` and migrations are
:mod:`mcp_memoryrouter.db`'s).

- :mod:`.store` the writer lock, per-thread readers, and the in-memory indexes;
- :mod:`.lexical` FTS5's tokenizer and the change log that keeps the BM25 index in step;
- :mod:`.vectors` float32 blobs, the embedding queue, cosines with numpy;
- :mod:`.owner` one serving process per database file.
"""

from mcp_memoryrouter.vault.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
