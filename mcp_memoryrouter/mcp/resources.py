"""Resources (memories:read): the vault's status and its most recent memories, as JSON,
within the result budget like every tool result."""

from __future__ import annotations

import json

from mcp_memoryrouter import schemas
from mcp_memoryrouter.mcp.binding import Resolver
from mcp_memoryrouter.mcp.budget import largest_fit, trim, whole_by
from mcp_memoryrouter.mcp.tools import Catalog, backend_errors
from mcp_memoryrouter.tokens import est_tokens

RECENT_TOKENS = 4_000


def register(catalog: Catalog, resolve: Resolver) -> None:
    budget = catalog.budget

    def fits(text: str) -> bool:
        return est_tokens(text) <= budget.tokens

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
        description=(
            "The newest memories (about 4,000 tokens), newest first, as {memories, omitted}; "
            "long texts are trimmed (inspect_memory returns the whole text)."
        ),
        mime_type="application/json",
    )
    async def vault_recent() -> str:
        binding = await resolve()
        binding.require("memories:read")
        body = schemas.DateSearchRequest.model_validate(
            {"from": "1970-01-01", "max_tokens": budget.content_tokens(RECENT_TOKENS)}
        )
        async with backend_errors():
            page = await binding.vault.date_search(body)
        cap = budget.text_share(len(page.memories))
        rows = [
            m.model_copy(update={"content": trim(m.content, cap, whole_by("inspect_memory", m.id))})
            for m in page.memories
        ]

        def build(k: int) -> str:
            shown = [m.model_dump(mode="json") for m in rows[:k]]
            return json.dumps({"memories": shown, "omitted": len(rows) - k}, ensure_ascii=False)

        return largest_fit(len(rows), build, fits)
