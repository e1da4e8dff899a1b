"""Migrations on PostgreSQL: numbered scripts applied once each, recorded in
``schema_migrations``, under an advisory lock so replicas starting together migrate once."""

from __future__ import annotations

from importlib import resources

import psycopg

# pg_advisory_lock key: any constant shared by every replica of this service.
_MIGRATION_LOCK = 0x4D454D524F555445  # "MEMROUTE"


def _scripts() -> list[tuple[int, str, str]]:
    folder = resources.files("mcp_memoryrouter.vault.migrations").joinpath("postgres")
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".sql"))
    return [
        (int(name.split("_", 1)[0]), name, folder.joinpath(name).read_text(encoding="utf-8"))
        for name in names
    ]


def migrate(url: str, until: int | None = None) -> int:
    """Apply every script newer than the recorded version (up to ``until`` when given: an
    upgrade test's older schema); return the schema version."""
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, "
                "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
            current = int(row[0]) if row else 0
            for version, name, script in _scripts():
                if version <= current or (until is not None and version > until):
                    continue
                with conn.transaction():
                    conn.execute(script.encode())
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        (version, name),
                    )
                current = version
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))
    return current
