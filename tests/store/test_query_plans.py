"""A statement that reads a vault's memories by their ids looks the ids up.

SQLite's planner has no statistics here: for ``vault_id = ? AND id IN (…)`` it took the
index on ``vault_id`` (estimated at ten rows) over twenty lookups of ``id``, and so read every
row of the vault for each search's hits (9 ms against 0.1 at 10,000 memories;
docs/benchmarks.md, "The chat proxy"). Its choice does not depend on how many rows there are,
so a small vault shows it.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.store.recorder import Executed, Recording, recording_sqlite
from tests.support import make_vault

# A read of memories naming their ids (``id IN (…)``, ``m.id IN (…)``).
BY_IDS = re.compile(r"\bFROM memories\b.*\bid IN \(", re.DOTALL)


def by_ids(executed: list[Executed]) -> dict[str, Executed]:
    """The distinct SELECTs of memories by ids, by their text."""
    return {
        e.sql: e
        for e in executed
        if e.sql.lstrip().upper().startswith("SELECT") and BY_IDS.search(e.sql) and e.rows
    }


def walks(conn: sqlite3.Connection, executed: Executed) -> list[str]:
    """The steps of the statement's plan that read memories through an index on vault_id
    alone (every row of the vault) rather than by key."""
    plan = conn.execute("EXPLAIN QUERY PLAN " + executed.sql, executed.rows[0]).fetchall()
    return [
        detail
        for *_, detail in plan
        if re.search(r"\b(SCAN|SEARCH) m(emories)?\b", detail) and "(vault_id=?" in detail
    ]


def test_search_and_prepare_read_their_hits_by_key(tmp_path: Path) -> None:
    recording = Recording()
    with recording_sqlite(recording):
        vault = make_vault(tmp_path)
        vault.ingest(*(f"note {i} about the garden and the deploy" for i in range(30)))
        for path, body in [
            ("/v1/memory/search", {"query": "garden deploy", "limit": 20}),
            ("/v1/memory/prepare", {"query": "garden deploy"}),
            ("/v1/memory/prepare", {"messages": [{"role": "user", "content": "the garden?"}]}),
        ]:
            response = vault.post(path, body)
            assert response.status_code == 200, response.text
    assert isinstance(vault.store, SQLiteStore)
    statements = by_ids(recording.executed)
    assert len(statements) >= 2, "the hits were not read by their ids"
    conn = sqlite3.connect(vault.store._path)
    try:
        walking = {sql: found for sql, e in statements.items() if (found := walks(conn, e))}
    finally:
        conn.close()
    assert not walking, walking
