"""Export a whole vault, every tier with its lineage, as the JSONL of :mod:`transfer.archive`.

The vault streams it in one request, ``GET /v1/memory/export`` (NDJSON, read from the store
page by page), instead of one date-search page and one inspect per reflection: an export of
thousands of memories is one request under any rate limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from mcp_memoryrouter.client import VaultClient


async def export_vault(
    client: VaultClient,
    write: Callable[[str], object],
    on_row: Callable[[], None] | None = None,
) -> int:
    """Write one JSON line per memory with ``write``; return how many were written."""
    written = 0
    async for line in client.export_lines():
        write(json.dumps(line, ensure_ascii=False) + "\n")
        written += 1
        if on_row is not None:
            on_row()
    return written
