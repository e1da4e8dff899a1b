"""Date search in PostgreSQL: raw rows by date and reflections by coverage, read through
server-side cursors and merged in page order; ``take_page`` stops reading at the budget."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Generator
from typing import Any

import psycopg

from mcp_memoryrouter.vault.rules.domain import Memory, SearchFilter
from mcp_memoryrouter.vault.rules.window import Order, Page, sort_key, take_page
from mcp_memoryrouter.vault.store.postgres_rows import MEMORY_COLUMNS
from mcp_memoryrouter.vault.store.sqlite_rows import memory_from_row

Conn = psycopg.Connection[tuple[Any, ...]]
_FETCH = 200
_names = itertools.count()


def _rows(conn: Conn, statement: str, params: list[object]) -> Generator[Memory, None, None]:
    with conn.cursor(name=f"window_{next(_names)}", scrollable=False) as cursor:
        cursor.itersize = _FETCH
        cursor.execute(statement, params)
        for row in cursor:
            yield memory_from_row(row)


def _raw(
    conn: Conn, vault_id: str, start: int, end: int, order: Order, session: str | None
) -> Generator[Memory, None, None]:
    direction = "DESC" if order == "newest_first" else "ASC"
    statement = (
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.vault_id = %s AND m.tier = 1 "
        "AND m.date_from BETWEEN %s AND %s"
    )
    params: list[object] = [vault_id, start, end]
    if session is not None:
        statement += " AND m.session_id = %s"
        params.append(session)
    statement += f" ORDER BY m.date_from {direction}, m.id {direction}"
    return _rows(conn, statement, params)


def _reflections(
    conn: Conn,
    vault_id: str,
    tiers: tuple[int, ...],
    start: int,
    end: int,
    order: Order,
    min_importance: int | None,
) -> Generator[Memory, None, None]:
    column, direction = ("date_from", "DESC") if order == "newest_first" else ("date_to", "ASC")
    statement = (
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.vault_id = %s "
        "AND m.tier = ANY(%s) AND m.date_from <= %s AND m.date_to >= %s"
    )
    params: list[object] = [vault_id, list(tiers), end, start]
    if min_importance is not None:
        statement += " AND m.importance >= %s"
        params.append(min_importance)
    statement += f" ORDER BY m.{column} {direction}, m.id {direction}"
    return _rows(conn, statement, params)


def date_page(
    conn: Conn,
    vault_id: str,
    start: int,
    end: int,
    order: Order,
    where: SearchFilter,
    budget: int,
) -> Page:
    tiers = where.tiers or (1, 2, 3)
    streams: list[Generator[Memory, None, None]] = []
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
        stream.close()
    return page
