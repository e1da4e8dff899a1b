"""Which memory corrects which, as the explorer recorded it.

A correction is a new memory, stored through ingest like any other; nothing is edited in
place. Its text says what it corrects (for whoever reads it: a model, an export), and this
table keeps the link between the two ids, so the corrected memory's page can say "corrected
by" and link to it. The table lives beside the explorer's sessions (``ui.sqlite3``, or the
shared PostgreSQL; made by ``ui/migrations``); it holds ids only, every row bound to a
vault, and a page shows a link only when the vault still answers the id with the session's
key.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memoryrouter.auth.state.database import Database

MAX_SHOWN = 20  # links a page shows, newest first


class Corrections:
    def __init__(self, db: Database) -> None:
        self._db = db

    @property
    def remote(self) -> bool:
        return self._db.remote

    def link(self, vault_ref: str, corrected: str, corrections: Sequence[str], now: float) -> None:
        """``corrections`` (the ids one correction was stored as) correct ``corrected``."""
        for correction in corrections:
            self._db.run(
                "INSERT INTO ui_corrections VALUES (?, ?, ?, ?) ON CONFLICT "
                "(vault_ref, corrected, correction) DO NOTHING",
                vault_ref,
                corrected,
                correction,
                now,
            )

    def corrected_by(self, vault_ref: str, memory_id: str) -> list[str]:
        rows = self._db.all(
            "SELECT correction FROM ui_corrections WHERE vault_ref = ? AND corrected = ? "
            f"ORDER BY created_at DESC LIMIT {MAX_SHOWN}",
            vault_ref,
            memory_id,
        )
        return [row["correction"] for row in rows]

    def corrects(self, vault_ref: str, memory_id: str) -> list[str]:
        rows = self._db.all(
            "SELECT corrected FROM ui_corrections WHERE vault_ref = ? AND correction = ? "
            f"ORDER BY created_at DESC LIMIT {MAX_SHOWN}",
            vault_ref,
            memory_id,
        )
        return [row["corrected"] for row in rows]

    def forget(self, vault_ref: str, memory_id: str) -> None:
        """Every link naming ``memory_id`` (it is gone from the vault)."""
        self._db.run(
            "DELETE FROM ui_corrections WHERE vault_ref = ? AND (corrected = ? OR correction = ?)",
            vault_ref,
            memory_id,
            memory_id,
        )

    def forget_vault(self, vault_ref: str) -> None:
        """Every link of a vault that was wiped."""
        self._db.run("DELETE FROM ui_corrections WHERE vault_ref = ?", vault_ref)
