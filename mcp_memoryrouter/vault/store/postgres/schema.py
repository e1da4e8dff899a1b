"""The vault's migrations on PostgreSQL, by the one runner (:mod:`mcp_memoryrouter.db.migrations`):
recorded in ``schema_migrations``, under the advisory lock replicas share."""

from __future__ import annotations

from mcp_memoryrouter.db.migrations import migrate_postgres
from mcp_memoryrouter.vault.store.sql import MIGRATIONS


def migrate(url: str, until: int | None = None) -> int:
    """Apply every script newer than the recorded version (up to ``until`` when given: an
    upgrade test's older schema); return the schema version."""
    return migrate_postgres(url, MIGRATIONS, until)
