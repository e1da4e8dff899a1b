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
    # memories already in the vault this text nearly repeats (id, cosine), best first
    similar: list[schemas.Similar] | None = None


async def store_memory(
    vault: Vault,
    content: Annotated[schemas.Text, Field(min_length=1, max_length=limits.STORE_MEMORY_CHARS)],
    date: Annotated[
        schemas.Text | None, Field(description="When it happened (ISO); default now.")
    ] = None,
    role: Literal["user", "assistant", "observation"] = "user",
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
                ]
            )
        )
    return shaped(
        StoreOutput(
            stored=result.stored,
            duplicates=result.duplicates,
            ids=result.ids,
            consolidation_suggestion=result.reflection.suggestion,
            similar=result.similar,
        )
    )


TOOLS = (
    ToolSpec(
        store_memory,
        "Store a memory",
        "Save what the user wants remembered as a raw (tier 1) memory: a fact, preference, "
        "decision or event, as one self-contained statement with absolute dates. Secrets "
        "(passwords, keys, tokens) are refused. Returns the ids stored (or found as "
        "duplicates), and in similar the memories already kept that say nearly the same "
        "(id and cosine score): inspect one before storing a correction as a new fact.",
        WRITES,
    ),
)
