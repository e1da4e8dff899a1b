"""Delete tools (memories:delete): by id, or the whole vault behind a spoken phrase."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from mcp_memoryrouter import schemas
from mcp_memoryrouter.mcp.binding import Resolver
from mcp_memoryrouter.mcp.tools import Catalog, backend_errors

CONFIRMATION = "DELETE ALL MEMORIES"
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)


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
            "Permanently delete memories by id (ids come from search_memories, "
            "date_search_memories or inspect_memory), at any tier, up to 500 per call. "
            "Deleting a raw memory keeps the reflections built from it. Confirm with the user "
            "first; deletion cannot be undone."
        ),
    )
    async def delete_memories(
        ids: Annotated[list[str], Field(min_length=1, max_length=500)],
    ) -> DeleteOutput:
        binding = await resolve()
        binding.require("memories:delete")
        async with backend_errors():
            done = await binding.vault.delete_ids(schemas.DeleteIdsRequest(ids=ids))
        return DeleteOutput(
            requested=done.requested,
            deleted=done.deleted,
            not_found=done.not_found,
            failed=done.failed,
        )

    @catalog.tool(
        title="Forget all memories",
        annotations=DESTRUCTIVE,
        description=(
            "Irreversibly wipe the whole vault: every memory at every tier. Only when the user "
            f"explicitly asks for it; pass confirmation exactly '{CONFIRMATION}'."
        ),
    )
    async def forget_all_memories(
        confirmation: Annotated[str, Field(description=f"Exactly '{CONFIRMATION}'.")],
    ) -> ForgetOutput:
        binding = await resolve()
        binding.require("memories:delete")
        if confirmation != CONFIRMATION:
            raise ToolError(
                f"not wiped: confirmation must be exactly '{CONFIRMATION}'. Ask the user to "
                "confirm that every memory should be deleted."
            )
        async with backend_errors():
            done = await binding.vault.wipe()
        return ForgetOutput(deleted=done.deleted)
