"""Resources: the vault's status and its most recent memories, as JSON, within the result
budget like every tool result."""

from __future__ import annotations

import json

from mcp_memoryrouter import schemas
from mcp_memoryrouter.mcp_server.binding import VaultBinding
from mcp_memoryrouter.mcp_server.budget import largest_fit, trim, whole_by
from mcp_memoryrouter.mcp_server.catalog import ResourceSpec
from mcp_memoryrouter.mcp_server.errors import backend_errors
from mcp_memoryrouter.tokens import est_tokens

RECENT_TOKENS = 4_000


async def vault_stats(vault: VaultBinding) -> str:
    async with backend_errors():
        stats = await vault.client.stats()
    return stats.model_dump_json()


async def vault_recent(vault: VaultBinding) -> str:
    budget = vault.budget
    body = schemas.DateSearchRequest.model_construct(
        from_="1970-01-01", max_tokens=budget.content_tokens(RECENT_TOKENS)
    )
    async with backend_errors():
        page = await vault.client.date_search(body)
    cap = budget.text_share(len(page.memories))
    rows = [
        m.model_copy(update={"content": trim(m.content, cap, whole_by("inspect_memory", m.id))})
        for m in page.memories
    ]

    def build(k: int) -> str:
        shown = [m.model_dump(mode="json") for m in rows[:k]]
        return json.dumps({"memories": shown, "omitted": len(rows) - k}, ensure_ascii=False)

    return largest_fit(len(rows), build, lambda text: est_tokens(text) <= budget.tokens)


RESOURCES = (
    ResourceSpec(
        "memory://vault/stats",
        vault_stats,
        name="vault-stats",
        title="Vault statistics",
        description="Memories and tokens per tier, oldest and newest dates, reflection debt.",
    ),
    ResourceSpec(
        "memory://vault/recent",
        vault_recent,
        name="vault-recent",
        title="Recent memories",
        description=(
            "The newest memories (about 4,000 tokens), newest first, as {memories, omitted}; "
            "long texts are trimmed (inspect_memory returns the whole text)."
        ),
    ),
)
