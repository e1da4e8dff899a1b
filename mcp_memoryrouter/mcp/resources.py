"""Resources (memories:read): the vault's status and its most recent memories, as JSON."""

from __future__ import annotations

import json

from mcp_memoryrouter import schemas
from mcp_memoryrouter.mcp.binding import Resolver
from mcp_memoryrouter.mcp.tools import Catalog, backend_errors

RECENT_TOKENS = 4_000


def register(catalog: Catalog, resolve: Resolver) -> None:
    @catalog.resource(
        "memory://vault/stats",
        name="vault-stats",
        title="Vault statistics",
        description="Memories and tokens per tier, oldest and newest dates, reflection debt.",
        mime_type="application/json",
    )
    async def vault_stats() -> str:
        binding = await resolve()
        binding.require("memories:read")
        async with backend_errors():
            stats = await binding.vault.stats()
        return stats.model_dump_json()

    @catalog.resource(
        "memory://vault/recent",
        name="vault-recent",
        title="Recent memories",
        description="The newest memories of the vault (about 4,000 tokens), newest first.",
        mime_type="application/json",
    )
    async def vault_recent() -> str:
        binding = await resolve()
        binding.require("memories:read")
        body = schemas.DateSearchRequest.model_validate(
            {"from": "1970-01-01", "max_tokens": RECENT_TOKENS}
        )
        async with backend_errors():
            page = await binding.vault.date_search(body)
        return json.dumps([m.model_dump(mode="json") for m in page.memories])
