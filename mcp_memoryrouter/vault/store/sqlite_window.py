"""Date search in SQLite: raw rows by date and reflections by coverage, merged in page order."""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterator

from mcp_memoryrouter.vault.rules.domain import Memory, SearchFilter
from mcp_memoryrouter.vault.rules.window import Order, Page, sort_key, take_page
from mcp_memoryrouter.vault.store.sqlite_rows import MEMORY_COLUMNS, memory_from_row, placeholders


def _rows(conn: sqlite3.Connection, sql: str, params: list[object]) -> Iterator[Memory]:
    cursor = conn.execute(sql, params)
    try:
        for row in cursor:
            yield memory_from_row(row)
    finally:
        cursor.close()


def _raw(
    conn: sqlite3.Connection, vault_id: str, start: int, end: int, order: Order, session: str | None
) -> Iterator[Memory]:
    direction = "DESC" if order == "newest_first" else "ASC"
    sql = (
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.vault_id = ? AND m.tier = 1 "
        "AND m.date_from BETWEEN ? AND ?"
    )
    params: list[object] = [vault_id, start, end]
    if session is not None:
        sql += " AND m.session_id = ?"
        params.append(session)
    sql += f" ORDER BY m.date_from {direction}, m.id {direction}"
    return _rows(conn, sql, params)


def _reflections(
    conn: sqlite3.Connection,
    vault_id: str,
    tiers: tuple[int, ...],
    start: int,
    end: int,
    order: Order,
    min_importance: int | None,
) -> Iterator[Memory]:
    column, direction = ("date_from", "DESC") if order == "newest_first" else ("date_to", "ASC")
    sql = (
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.vault_id = ? "
        f"AND m.tier IN ({placeholders(len(tiers))}) AND m.date_from <= ? AND m.date_to >= ?"
    )
    params: list[object] = [vault_id, *tiers, end, start]
    if min_importance is not None:
        sql += " AND m.importance >= ?"
        params.append(min_importance)
    sql += f" ORDER BY m.{column} {direction}, m.id {direction}"
    return _rows(conn, sql, params)


def date_page(
    conn: sqlite3.Connection,
    vault_id: str,
    start: int,
    end: int,
    order: Order,
    where: SearchFilter,
    budget: int,
) -> Page:
    tiers = where.tiers or (1, 2, 3)
    streams: list[Iterator[Memory]] = []
    if 1 in tiers and where.min_importance is None:
        streams.append(_raw(conn, vault_id, start, end, order, where.session_id))
    higher = tuple(t for t in tiers if t > 1)
    if higher:
        streams.append(
            _reflections(conn, vault_id, higher, start, end, order, where.min_importance)
        )
    newest = order == "newest_first"
    # Keys clamped into the window: the rows a stream yields last (reflections reaching past
    # the window's edge) share the edge as their key, so each key's rows stay contiguous.
    bounds = (start, end)
    merged = heapq.merge(*streams, key=lambda m: (sort_key(m, order, bounds), m.id), reverse=newest)
    page = take_page(merged, order, budget, bounds)
    for stream in streams:
        stream.close()  # type: ignore[attr-defined]
    return page
