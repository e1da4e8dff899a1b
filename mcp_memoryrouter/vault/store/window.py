"""Date search in SQL, once for both stores: raw rows by date and reflections by coverage,
each read through a cursor in page order and merged; ``take_page`` stops reading at the
budget (the paging rules are :mod:`mcp_memoryrouter.vault.rules.window`)."""

from __future__ import annotations

import heapq
from collections.abc import Generator

from mcp_memoryrouter.db import Params, Tx
from mcp_memoryrouter.vault.rules.domain import Memory, SearchFilter
from mcp_memoryrouter.vault.rules.window import Order, Page, sort_key, take_page
from mcp_memoryrouter.vault.store.sql import MEMORY_COLUMNS, memory_from_row

FETCH = 200  # rows per read of each cursor


def _rows(tx: Tx, sql: str, params: Params) -> Generator[Memory]:
    rows = tx.stream(sql, params, FETCH)
    try:
        yield from map(memory_from_row, rows)
    finally:
        rows.close()


def _raw(
    tx: Tx, vault_id: str, start: int, end: int, order: Order, session: str | None
) -> Generator[Memory]:
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
    return _rows(tx, sql, params)


def _reflections(
    tx: Tx,
    vault_id: str,
    tiers: tuple[int, ...],
    start: int,
    end: int,
    order: Order,
    min_importance: int | None,
) -> Generator[Memory]:
    column, direction = ("date_from", "DESC") if order == "newest_first" else ("date_to", "ASC")
    test, tier_params = tx.among(tiers)
    sql = (
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.vault_id = ? "
        f"AND m.tier {test} AND m.date_from <= ? AND m.date_to >= ?"
    )
    params: list[object] = [vault_id, *tier_params, end, start]
    if min_importance is not None:
        sql += " AND m.importance >= ?"
        params.append(min_importance)
    sql += f" ORDER BY m.{column} {direction}, m.id {direction}"
    return _rows(tx, sql, params)


def date_page(
    tx: Tx, vault_id: str, start: int, end: int, order: Order, where: SearchFilter, budget: int
) -> Page:
    assert where.writers is None, "date pages do not filter by writer (prepare alone does)"
    tiers = where.tiers or (1, 2, 3)
    streams: list[Generator[Memory]] = []
    if 1 in tiers and where.min_importance is None:
        streams.append(_raw(tx, vault_id, start, end, order, where.session_id))
    higher = tuple(t for t in tiers if t > 1)
    if higher:
        streams.append(_reflections(tx, vault_id, higher, start, end, order, where.min_importance))
    newest = order == "newest_first"
    # Keys clamped into the window: the rows a stream yields last (reflections reaching past
    # the window's edge) share the edge as their key, so each key's rows stay contiguous.
    bounds = (start, end)
    merged = heapq.merge(*streams, key=lambda m: (sort_key(m, order, bounds), m.id), reverse=newest)
    page = take_page(merged, order, budget, bounds)
    for stream in streams:
        stream.close()
    return page
