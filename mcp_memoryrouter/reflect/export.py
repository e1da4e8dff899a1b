"""Export a whole vault, every tier with its lineage, as the JSONL of :mod:`reflect.archive`.

Every memory is enumerated by ``POST /v1/memory/date-search`` over all time, oldest first,
following the continuation (``from: returned.to`` while ``truncated``), which visits each
row exactly once. Each reflection's sources come from ``POST /v1/memory/inspect``, page by
page (``offset`` / ``next_offset``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp_memoryrouter import schemas
from mcp_memoryrouter.client import VaultClient

ALL_TIME = ("0001-01-01", "9999-12-31")  # rows may be dated in the future, too
PAGE_TOKENS = 200_000


async def export_vault(
    client: VaultClient,
    write: Callable[[str], object],
    on_row: Callable[[], None] | None = None,
) -> int:
    """Write one JSON line per memory with ``write``; return how many were written."""
    written = 0
    start, end = ALL_TIME
    while True:
        page = await client.date_search(
            schemas.DateSearchRequest(
                from_=start, to=end, order="oldest_first", max_tokens=PAGE_TOKENS
            )
        )
        for row in page.memories:
            write(json.dumps(await _line(client, row), ensure_ascii=False) + "\n")
            written += 1
            if on_row is not None:
                on_row()
        if not page.truncated:
            return written
        start = page.returned.to


async def _line(client: VaultClient, row: schemas.MemoryRow) -> dict[str, Any]:
    if row.tier == 1:
        return {"id": row.id, "tier": 1, "role": row.role, "content": row.content, "date": row.date}
    covers = None if row.covers is None else {"from": row.covers.from_, "to": row.covers.to}
    return {
        "id": row.id,
        "tier": row.tier,
        "content": row.content,
        "importance": row.importance,
        "covers": covers,
        "sources": await sources_of(client, row.id),
    }


async def sources_of(client: VaultClient, memory_id: str) -> list[str]:
    """The ids of every source a reflection still has, all pages of them."""
    ids: list[str] = []
    offset = 0
    while True:
        found = await client.inspect(schemas.InspectRequest(memory_id=memory_id, offset=offset))
        ids += [source.id for source in found.sources or []]
        if not found.truncated or found.next_offset is None:
            return ids
        offset = found.next_offset
