"""Row mapping and SQL pieces shared by the SQLite store modules."""

from __future__ import annotations

import sqlite3
from typing import cast

from mcp_memoryrouter.vault.rules.domain import Memory, Role, Tier

MEMORY_COLUMNS = (
    "m.id, m.tier, m.content, m.tokens, m.date_from, m.date_to, m.role, m.importance, "
    "m.session_id, m.batch_id"
)


def memory_from_row(row: sqlite3.Row | tuple[object, ...]) -> Memory:
    return Memory(
        id=cast(str, row[0]),
        tier=cast(Tier, row[1]),
        content=cast(str, row[2]),
        tokens=cast(int, row[3]),
        date_from=cast(int, row[4]),
        date_to=cast(int, row[5]),
        role=cast(Role | None, row[6]),
        importance=cast(int | None, row[7]),
        session_id=cast(str | None, row[8]),
        batch_id=cast(str | None, row[9]),
    )


def placeholders(count: int) -> str:
    return ",".join("?" * count)
