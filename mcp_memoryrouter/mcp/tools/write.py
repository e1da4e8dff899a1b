"""The write tool (memories:write): store a memory, refusing obvious secrets."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from mcp_memoryrouter import schemas
from mcp_memoryrouter.mcp.binding import Resolver
from mcp_memoryrouter.mcp.budget import shaped
from mcp_memoryrouter.mcp.secrets import find_secret
from mcp_memoryrouter.mcp.tools import WRITES, Catalog, backend_errors


class StoreOutput(BaseModel):
    stored: int  # raw memories written (a long text is split into several)
    duplicates: int  # identical memories already in the vault, not written again
    ids: list[str]  # one per stored chunk, in order; a duplicate's is the id already kept
    consolidation_suggestion: str | None = None


def register(catalog: Catalog, resolve: Resolver) -> None:
    @catalog.tool(
        title="Store a memory",
        annotations=WRITES,
        description=(
            "Save what the user wants remembered as a raw (tier 1) memory: a fact, preference, "
            "decision or event, as one self-contained statement with absolute dates. Secrets "
            "(passwords, keys, tokens) are refused. Returns the ids stored (or found as "
            "duplicates)."
        ),
    )
    async def store_memory(
        content: Annotated[
            str,
            Field(min_length=1, max_length=100_000),
        ],
        date: Annotated[
            str | None, Field(description="When it happened (ISO); default now.")
        ] = None,
        role: Literal["user", "assistant", "observation"] = "user",
    ) -> Annotated[CallToolResult, StoreOutput]:
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
        return shaped(
            StoreOutput(
                stored=result.stored,
                duplicates=result.duplicates,
                ids=result.ids,
                consolidation_suggestion=result.reflection.suggestion,
            )
        )
