"""PostgreSQL transactions in the dialect of :mod:`..sql`: ``?`` placeholders run as
psycopg's ``%s``, arrays for membership, row locks where a change reads rows."""

from __future__ import annotations

import itertools
from collections.abc import Generator, Sequence
from functools import lru_cache
from typing import Any

import psycopg

from mcp_memoryrouter.vault.store.sql import Params, Row

Conn = psycopg.Connection[tuple[Any, ...]]
_cursor_names = itertools.count()


@lru_cache(maxsize=512)
def native(sql: str) -> str:
    """A statement written with ``?`` placeholders in psycopg's style: ``%s`` (and a
    literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgTx:
    """A transaction on one pooled connection."""

    bytewise = ' COLLATE "C"'  # text orders by the database's locale unless told otherwise
    skip_locked = " FOR UPDATE SKIP LOCKED"
    join_in_order = "JOIN"

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def one(self, sql: str, params: Params = ()) -> Row | None:
        return self.conn.execute(native(sql), params).fetchone()

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        return self.conn.execute(native(sql), params).fetchall()

    def run(self, sql: str, params: Params = ()) -> int:
        return self.conn.execute(native(sql), params).rowcount

    def many(self, sql: str, rows: Sequence[Params]) -> None:
        if rows:
            with self.conn.cursor() as cursor:
                cursor.executemany(native(sql), rows)

    def stream(self, sql: str, params: Params, fetch: int) -> Generator[Row]:
        # A server-side cursor: rows arrive ``fetch`` at a time, and a query that locks
        # rows locks only those read so far.
        name = f"stream_{next(_cursor_names)}"
        with self.conn.cursor(name=name, scrollable=False) as cursor:
            cursor.itersize = fetch
            cursor.execute(native(sql), params)
            yield from cursor

    def among(self, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return "= ANY(?)", [list(values)]

    def for_update(self, of: str | None = None) -> str:
        return " FOR UPDATE" if of is None else f" FOR UPDATE OF {of}"
