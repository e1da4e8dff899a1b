"""The PostgreSQL store (for scale): what only PostgreSQL does, beside the use cases written
once in :mod:`..base`.

- :mod:`.store` the connection pool and retried transactions;
- :mod:`.connection` the dialect's ``Tx`` (``%s`` placeholders, arrays, row locks);
- :mod:`.schema` migrations under an advisory lock;
- :mod:`.search` and :mod:`.lexical` tsvector search and the vault's common words;
- :mod:`.vectors` pgvector: exact and HNSW search, the claimed embedding queue.
"""

from mcp_memoryrouter.vault.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
