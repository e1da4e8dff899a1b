"""delete_memories and forget_all_memories: by id, or the whole vault behind a spoken
phrase."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.mcp_server.binding import Vault
from mcp_memoryrouter.mcp_server.budget import largest_fit, shaped
from mcp_memoryrouter.mcp_server.catalog import DESTRUCTIVE, ToolSpec
from mcp_memoryrouter.mcp_server.errors import backend_errors

CONFIRMATION = "DELETE ALL MEMORIES"


class DeleteOutput(BaseModel):
    requested: int
    deleted: int
    not_found: int
    failed: list[str]
    dry_run: bool | None = None
    by_tier: dict[str, list[str]] | None = None  # ids that went (would go) at each tier
    ids_omitted: int = 0  # ids of by_tier left out to fit the result budget
    returned_to_pool: dict[str, int] | None = None  # sources back in the pool, per tier
    # a derived dry run: what following lineage (true) and evidence would each take, listed
    # above the tier the ids are at (the ids themselves go either way: by_tier lists them)
    choices: dict[str, schemas.DeleteChoice] | None = None


class ForgetOutput(BaseModel):
    deleted: int


async def delete_memories(
    vault: Vault,
    ids: schemas.Ids,
    derived: Annotated[
        bool | Literal["evidence"],
        Field(
            description='Also delete reflections built from them ("evidence": only those '
            "resting on them); their other sources are consolidated again."
        ),
    ] = False,
    dry_run: Annotated[bool, Field(description="List what would go; change nothing.")] = False,
) -> Annotated[CallToolResult, DeleteOutput]:
    async with backend_errors():
        done = await vault.client.delete_ids(
            schemas.DeleteIdsRequest.model_construct(ids=ids, derived=derived, dry_run=dry_run)
        )
    listed = done.by_tier or {}
    most = max(
        (
            len(ids)
            for tiers in [listed, *(c.by_tier for c in (done.choices or {}).values())]
            for ids in tiers.values()
        ),
        default=0,
    )

    def build(k: int) -> CallToolResult:
        """The answer with at most ``k`` ids of each tier listed (the rest counted)."""
        shown = {tier: ids[:k] for tier, ids in listed.items()}
        return shaped(
            DeleteOutput(
                requested=done.requested,
                deleted=done.deleted,
                not_found=done.not_found,
                failed=done.failed,
                dry_run=done.dry_run,
                by_tier=shown if done.by_tier is not None else None,
                ids_omitted=sum(len(ids) - len(shown[t]) for t, ids in listed.items()),
                returned_to_pool=done.returned_to_pool,
                choices=None
                if done.choices is None
                else {
                    way: schemas.DeleteChoice(
                        by_tier={t: ids[:k] for t, ids in choice.by_tier.items() if t != "1"},
                        returned_to_pool=choice.returned_to_pool,
                    )
                    for way, choice in done.choices.items()
                },
            )
        )

    return largest_fit(most, build, vault.budget.fits)


async def forget_all_memories(
    vault: Vault, confirmation: str
) -> Annotated[CallToolResult, ForgetOutput]:
    if confirmation != CONFIRMATION:
        raise ToolError(
            f"not wiped: confirmation must be exactly '{CONFIRMATION}'. Ask the user to "
            "confirm that every memory should be deleted."
        )
    async with backend_errors():
        done = await vault.client.wipe()
    return shaped(ForgetOutput(deleted=done.deleted))


TOOLS = (
    ToolSpec(
        delete_memories,
        "Delete memories",
        "Permanently delete memories by id, any tier, up to "
        f"{limits.MAX_DELETE_IDS} per call. Reflections built from them stay unless derived "
        "is set (the user wants it forgotten entirely). Run dry_run first, show the user "
        "what would go, and confirm: it cannot be undone.",
        DESTRUCTIVE,
    ),
    ToolSpec(
        forget_all_memories,
        "Forget all memories",
        "Irreversibly wipe every memory of the vault, only when the user explicitly asks; "
        f"confirmation must be exactly '{CONFIRMATION}'.",
        DESTRUCTIVE,
    ),
)
