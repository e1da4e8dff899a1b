"""SQLite connections: WAL mode, the schema's migrations, and the dialect's ``Tx``."""

from __future__ import annotations

import sqlite3
from collections.abc import Generator, Sequence
from importlib import resources
from typing import Any

from mcp_memoryrouter.vault.store.sql import Params, Row


def connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every migration newer than ``PRAGMA user_version``; return the new version."""
    (current,) = conn.execute("PRAGMA user_version").fetchone()
    folder = resources.files("mcp_memoryrouter.vault.migrations").joinpath("sqlite")
    scripts = sorted(p.name for p in folder.iterdir() if p.name.endswith(".sql"))
    for name in scripts:
        version = int(name.split("_", 1)[0])
        if version <= current:
            continue
        conn.executescript(
            "BEGIN IMMEDIATE;\n"
            + folder.joinpath(name).read_text(encoding="utf-8")
            + f"\nPRAGMA user_version = {version};\nCOMMIT;"
        )
        current = version
    return int(current)


class SqliteTx:
    """A transaction on one SQLite connection (see :mod:`..sql`). One writer at a time
    holds the database, so nothing is locked row by row."""

    bytewise = ""  # the BINARY collation compares bytes already
    skip_locked = ""
    join_in_order = "CROSS JOIN"  # SQLite keeps the left table of a CROSS JOIN outermost

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def one(self, sql: str, params: Params = ()) -> Row | None:
        row: Row | None = self.conn.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        return self.conn.execute(sql, params).fetchall()

    def run(self, sql: str, params: Params = ()) -> int:
        return self.conn.execute(sql, params).rowcount

    def many(self, sql: str, rows: Sequence[Params]) -> None:
        self.conn.executemany(sql, rows)

    def stream(self, sql: str, params: Params, fetch: int) -> Generator[Row]:
        cursor = self.conn.execute(sql, params)
        try:
            while batch := cursor.fetchmany(fetch):
                yield from batch
        finally:
            cursor.close()

    def among(self, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"IN ({','.join('?' * len(values))})", list(values)

    def for_update(self, of: str | None = None) -> str:
        return ""
