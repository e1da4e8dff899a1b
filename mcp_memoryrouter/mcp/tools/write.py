"""The write tool (memories:write): store a memory, refusing obvious secrets."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from mcp_memoryrouter import schemas
from mcp_memoryrouter.mcp.binding import Resolver
from mcp_memoryrouter.mcp.secrets import find_secret
from mcp_memoryrouter.mcp.tools import Catalog, backend_errors


class StoreOutput(BaseModel):
    stored: int = Field(description="Raw memories written (long text is split into several).")
    duplicates: int = Field(description="Identical memories already in the vault, not rewritten.")
    consolidation_suggestion: str | None = None


def register(catalog: Catalog, resolve: Resolver) -> None:
    @catalog.tool(
        title="Store a memory",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
        description=(
            "Save something worth remembering into the user's long-term memory as a raw "
            "(tier 1) memory: a fact, preference, decision or event, written as one "
            "self-contained statement with absolute dates. Store only what the user wants "
            "remembered. Never store secrets (passwords, API keys, tokens, private keys): they "
            "are refused. Give date (ISO) when the event happened at another time than now."
        ),
    )
    async def store_memory(
        content: Annotated[
            str,
            Field(min_length=1, max_length=100_000, description="The memory, as standalone prose."),
        ],
        date: Annotated[
            str | None, Field(description="When it happened (ISO); default now.")
        ] = None,
        role: Literal["user", "assistant", "observation"] = "user",
    ) -> StoreOutput:
        binding = await resolve()
        binding.require("memories:write")
        secret = find_secret(content)
        if secret is not None:
            raise ToolError(
                f"refused: the text looks like it contains {secret}. Secrets must not go into "
                "long-term memory; store the fact without the secret value instead."
            )
        async with backend_errors():
            body = schemas.IngestRequest(
                messages=[schemas.MessageIn(role=role, content=content, date=date)]
            )
            result = await binding.vault.ingest(body)
        return StoreOutput(
            stored=result.stored,
            duplicates=result.duplicates,
            consolidation_suggestion=result.reflection.suggestion,
        )
