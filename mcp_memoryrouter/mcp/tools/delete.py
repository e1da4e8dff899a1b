"""Delete tools (memories:delete): by id, or the whole vault behind a spoken phrase."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from mcp_memoryrouter import schemas
from mcp_memoryrouter.mcp.binding import Resolver
from mcp_memoryrouter.mcp.budget import shaped
from mcp_memoryrouter.mcp.tools import DESTRUCTIVE, Catalog, backend_errors

CONFIRMATION = "DELETE ALL MEMORIES"


class DeleteOutput(BaseModel):
    requested: int
    deleted: int
    not_found: int
    failed: list[str]


class ForgetOutput(BaseModel):
    deleted: int


def register(catalog: Catalog, resolve: Resolver) -> None:
    @catalog.tool(
        title="Delete memories",
        annotations=DESTRUCTIVE,
        description=(
            "Permanently delete memories by id (from search or inspect results), any tier, up "
            "to 500 per call; reflections built from a deleted memory stay. Confirm with the "
            "user first: it cannot be undone."
        ),
    )
    async def delete_memories(
        ids: Annotated[list[str], Field(min_length=1, max_length=500)],
    ) -> Annotated[CallToolResult, DeleteOutput]:
        binding = await resolve()
        binding.require("memories:delete")
        async with backend_errors():
            done = await binding.vault.delete_ids(schemas.DeleteIdsRequest(ids=ids))
        return shaped(
            DeleteOutput(
                requested=done.requested,
                deleted=done.deleted,
                not_found=done.not_found,
                failed=done.failed,
            )
        )

    @catalog.tool(
        title="Forget all memories",
        annotations=DESTRUCTIVE,
        description=(
            "Irreversibly wipe every memory of the vault, only when the user explicitly asks; "
            f"confirmation must be exactly '{CONFIRMATION}'."
        ),
    )
    async def forget_all_memories(
        confirmation: str,
    ) -> Annotated[CallToolResult, ForgetOutput]:
        binding = await resolve()
        binding.require("memories:delete")
        if confirmation != CONFIRMATION:
            raise ToolError(
                f"not wiped: confirmation must be exactly '{CONFIRMATION}'. Ask the user to "
                "confirm that every memory should be deleted."
            )
        async with backend_errors():
            done = await binding.vault.wipe()
        return shaped(ForgetOutput(deleted=done.deleted))
