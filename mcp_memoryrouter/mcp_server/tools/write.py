"""store_memory: store a memory, refusing obvious secrets."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.mcp_server.binding import Vault
from mcp_memoryrouter.mcp_server.budget import shaped
from mcp_memoryrouter.mcp_server.catalog import WRITES, ToolSpec
from mcp_memoryrouter.mcp_server.errors import backend_errors
from mcp_memoryrouter.mcp_server.secrets import find_secret


class StoreOutput(BaseModel):
    stored: int  # raw memories written (a long text is split into several)
    duplicates: int  # identical memories already in the vault, not written again
    ids: list[str]  # one per stored chunk, in order; a duplicate's is the id already kept
    consolidation_suggestion: str | None = None
    # with dedupe "near": memories already in the vault this text nearly repeats (id,
    # cosine), best first
    similar: list[schemas.Similar] | None = None
    # with dedupe "near": the text not stored, and the memory it repeats
    skipped: list[schemas.Skipped] | None = None


async def store_memory(
    vault: Vault,
    content: Annotated[schemas.Text, Field(min_length=1, max_length=limits.STORE_MEMORY_CHARS)],
    date: Annotated[
        schemas.Text | None, Field(description="When it happened (ISO); default now.")
    ] = None,
    role: Literal["user", "assistant", "observation"] = "user",
    dedupe: Annotated[
        schemas.Dedupe,
        Field(description="near: skip a text that repeats a kept memory (no new name or number)"),
    ] = "exact",
) -> Annotated[CallToolResult, StoreOutput]:
    secret = find_secret(content)
    if secret is not None:
        raise ToolError(
            f"refused: the text looks like it contains {secret}. Secrets must not go into "
            "long-term memory; store the fact without the secret value instead."
        )
    async with backend_errors():
        result = await vault.client.ingest(
            schemas.IngestRequest.model_construct(
                messages=[
                    schemas.IngestMessage.model_construct(role=role, content=content, date=date)
                ],
                dedupe=dedupe,
            )
        )
    return shaped(
        StoreOutput(
            stored=result.stored,
            duplicates=result.duplicates,
            ids=result.ids,
            consolidation_suggestion=result.reflection.suggestion,
            similar=result.similar,
            skipped=result.skipped or None,
        )
    )


TOOLS = (
    ToolSpec(
        store_memory,
        "Store a memory",
        "Save what the user wants remembered as a raw (tier 1) memory: a fact, preference, "
        "decision or event, as one self-contained statement with absolute dates. Secrets "
        "(passwords, keys, tokens) are refused. Returns the ids stored; with dedupe near, "
        "similar: kept memories it nearly repeats.",
        WRITES,
    ),
)
