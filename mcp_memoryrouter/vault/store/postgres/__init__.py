"""The PostgreSQL store (for scale): what only PostgreSQL does, beside the use cases written
once in :mod:`..base` (the pool, the dialect's ``Tx`` and migrations are
:mod:`mcp_memoryrouter.db`'s).

- :mod:`.store` the connection pool and retried transactions;
- :mod:`.schema` the vault's migrations;
- :mod:`.search` and :mod:`.lexical` tsvector search and the vault's common words;
- :mod:`.vectors` pgvector: exact and HNSW search, the claimed embedding queue.
"""

from mcp_memoryrouter.vault.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
