"""consolidate_memories and commit_reflections: the consolidation round trip inside a chat.

The model sees texts, dates and the server's contract; never a memory id. The batch id is
the lease ticket, and the server builds all lineage itself. A batch is checked out to fit
the result budget with its contract: it cannot be trimmed afterwards, since the reflections
committed for it cover all of it.
"""

from __future__ import annotations

import base64
import zlib
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types import CallToolResult
from mcp_types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    InputRequiredResult,
    MissingRequiredClientCapabilityErrorData,
    SamplingCapability,
    SamplingMessage,
    TextContent,
)
from mcp_types.version import is_version_at_least
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import ModelFailure
from mcp_memoryrouter.mcp_server.binding import Vault, bind_call
from mcp_memoryrouter.mcp_server.budget import SETTING, ResultBudget, shaped
from mcp_memoryrouter.mcp_server.catalog import WRITES, WRITES_IDEMPOTENT, ToolSpec
from mcp_memoryrouter.mcp_server.errors import backend_errors
from mcp_memoryrouter.reflect.loop import (
    MAX_BATCHES_PER_TRIGGER,
    RunReport,
    Waiting,
    answer_triggered,
    run_triggered,
    start_triggered,
)
from mcp_memoryrouter.reflect.models import Model


class BatchMemory(BaseModel):
    text: str
    date: str
    line: int | None = None  # what an entry's "cites" names


class ConsolidateOutput(BaseModel):
    batch_id: str | None = None  # none when nothing waits (message says so)
    tier: int | None = None
    count: int
    memories: list[BatchMemory] = Field(default_factory=list)
    reflection_contract: schemas.ReflectionContract | None = None
    lease_expires_at: str | None = None
    message: str | None = None


class CommitOutput(BaseModel):
    committed: bool
    already_committed: bool
    tier: int  # the tier the new reflections were stored at
    reflections_created: int
    sources_consolidated: int
    reflection: schemas.Reflection
    consolidation_suggestion: str | None = None


def batch_result(budget: ResultBudget, batch: schemas.CheckoutResponse) -> CallToolResult:
    """The batch as the model sees it (no source ids), or a tool error when even the
    smallest batch the vault checks out does not fit the budget."""
    result = shaped(
        ConsolidateOutput(
            batch_id=batch.batch_id,
            tier=batch.tier,
            count=batch.count,
            memories=[
                BatchMemory(text=m.text, date=m.date, line=m.line) for m in batch.memories or []
            ],
            reflection_contract=batch.reflection_contract,
            lease_expires_at=batch.lease_expires_at,
            message=batch.message,
        )
    )
    if not budget.fits(result):
        raise ToolError(
            f"result_too_large: this batch of {batch.count} memories with its contract needs "
            f"{budget.cost(result)} tokens, over this server's {budget.tokens}-token result "
            f"budget ({SETTING}); ask the operator to raise it. The batch's lease expires on "
            f"its own at {batch.lease_expires_at}."
        )
    return result


async def consolidate_memories(
    vault: Vault,
    tier: Literal[1, 2] = 1,
    max_tokens: Annotated[
        int | None,
        Field(
            ge=limits.CHECKOUT_TOKENS_MIN,
            le=limits.CHECKOUT_TOKENS_MAX,
            description="Batch size; smaller gives tighter lineage.",
        ),
    ] = None,
) -> Annotated[CallToolResult, ConsolidateOutput]:
    budget, smallest = vault.budget, limits.CHECKOUT_TOKENS_MIN
    reserved = limits.CONTRACT_TOKENS
    if budget.content_tokens(None, reserved) < smallest:
        raise ToolError(
            f"result_too_large: the smallest batch ({smallest} tokens) with its contract does "
            f"not fit this server's {budget.tokens}-token result budget ({SETTING}); ask the "
            f"operator to raise it to at least {reserved + smallest * 5 // 2}."
        )
    async with backend_errors():
        batch = await vault.client.checkout(
            schemas.CheckoutRequest.model_construct(
                tier=tier, max_tokens=budget.content_tokens(max_tokens, reserved), contract=2
            )
        )
    return batch_result(budget, batch)


async def commit_reflections(
    vault: Vault, batch_id: schemas.Id, entries: schemas.Entries
) -> Annotated[CallToolResult, CommitOutput]:
    async with backend_errors():
        done = await vault.client.commit(
            schemas.CommitRequest.model_construct(batch_id=batch_id, entries=entries)
        )
    return shaped(
        CommitOutput(
            committed=done.committed,
            already_committed=done.already_committed,
            tier=done.tier,
            reflections_created=len(done.created),
            sources_consolidated=done.sources_consolidated,
            reflection=done.reflection,
            consolidation_suggestion=done.reflection.suggestion,
        )
    )


class ReflectOutput(BaseModel):
    batches: int  # batches checked out
    reflections_created: int
    memories_consolidated: int
    stopped: str  # why the run ended: loop.Stop (below_threshold, batch_limit, ...)
    failures: list[str] = Field(default_factory=list)  # why a batch was left to expire
    reflection: schemas.Reflection | None = None  # the debt after the run
    consolidation_suggestion: str | None = None


SAMPLE_KEY = "reflection"  # the one input request a round of reflect_memories asks
_WAITING = TypeAdapter(Waiting)
_NO_SAMPLING = (
    "reflect_memories needs a client that lets the server ask its model (MCP sampling), and "
    "this client did not declare it; consolidate with consolidate_memories, write the entries "
    "yourself, then commit_reflections."
)
_NO_CHANNEL = (
    "reflect_memories cannot ask your client's model on this connection: before protocol "
    "2026-07-28 a server asks the client over the connection's session, and this HTTP "
    "server keeps no sessions (any replica answers any request). Connect with protocol "
    "2026-07-28 or over stdio, or consolidate with consolidate_memories, write the entries "
    "yourself, then commit_reflections."
)


async def reflect_memories(
    ctx: Context[Any, Any],
) -> Annotated[CallToolResult, ReflectOutput] | InputRequiredResult:
    if not _asks_in_results(ctx) and not ctx.session.can_send_request:
        raise ToolError(_NO_CHANNEL)  # nor does it know the capabilities: no session holds them
    if not _can_sample(ctx):
        if _asks_in_results(ctx):
            required = ClientCapabilities(sampling=SamplingCapability())
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message=_NO_SAMPLING,
                data=MissingRequiredClientCapabilityErrorData(
                    required_capabilities=required
                ).model_dump(by_alias=True, mode="json", exclude_none=True),
            )
        raise ToolError(_NO_SAMPLING)
    vault = await bind_call(ctx)
    async with backend_errors():
        if _asks_in_results(ctx):
            return await _round(ctx, vault.client)
        reflection = (await vault.client.stats()).reflection
        report = await run_triggered(
            vault.client, _client_model(ctx), reflection, max_tokens=limits.SAMPLED_BATCH_TOKENS
        )
    return _reported(report)


def _can_sample(ctx: Context[Any, Any]) -> bool:
    capabilities = ctx.client_capabilities
    return capabilities is not None and capabilities.sampling is not None


def _asks_in_results(ctx: Context[Any, Any]) -> bool:
    """Protocol 2026-07-28 and later: the server asks by answering InputRequiredResult, and
    the client retries the call with the answer (no server-to-client request)."""
    version = ctx.protocol_version
    return version is not None and is_version_at_least(version, "2026-07-28")


async def _round(
    ctx: Context[Any, Any], client: VaultClient
) -> CallToolResult | InputRequiredResult:
    """One round of the run: start it, or go on with the model's answer. Between rounds the
    run waits in the request state, which the SDK seals (encrypted and authenticated, bound
    to the caller, expiring) before the client sees it: the batch id in it never reaches the
    model, and a tampered state is refused."""
    if ctx.request_state is None:
        reflection = (await client.stats()).reflection
        step = await start_triggered(client, reflection, max_tokens=limits.SAMPLED_BATCH_TOKENS)
    else:
        waiting = _unpacked(ctx.request_state)
        response = (ctx.input_responses or {}).get(SAMPLE_KEY)
        if response is None:  # retried without the answer: ask the same question again
            return _ask(waiting)
        step = await answer_triggered(client, waiting.run, _answer_text(response))
    if isinstance(step, Waiting):
        return _ask(step)
    return _reported(step)


def _ask(waiting: Waiting) -> InputRequiredResult:
    return InputRequiredResult(
        input_requests={SAMPLE_KEY: CreateMessageRequest(params=_sampling(waiting.prompt))},
        request_state=_packed(waiting),
    )


def _packed(waiting: Waiting) -> str:
    """The run as request state: compressed (the batch's texts make most of it, and the
    client sends it back every round), then sealed by the SDK."""
    return base64.b85encode(zlib.compress(_WAITING.dump_json(waiting), 6)).decode()


def _unpacked(state: str) -> Waiting:
    """The run back from a state this server sealed (the SDK checked it is ours)."""
    return _WAITING.validate_json(zlib.decompress(base64.b85decode(state)))


def _sampling(prompt: str) -> CreateMessageRequestParams:
    """What the host's model is asked: the contract's instructions verbatim, then the
    batch's dated texts (``reflect/prompt.py``); no id of any kind."""
    return CreateMessageRequestParams(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=limits.SAMPLED_ANSWER_TOKENS,
        include_context="none",
    )


def _answer_text(response: object) -> str | ModelFailure:
    """The model's answer, untrusted: the entries are checked against the contract before
    anything is committed."""
    if isinstance(response, CreateMessageResult) and isinstance(response.content, TextContent):
        return response.content.text
    return ModelFailure("the client answered the sampling request without text")


def _client_model(ctx: Context[Any, Any]) -> Model:
    """The host's model over the connection's back channel (protocol 2025-11-25 and before:
    stdio, or a session that can carry a server-to-client request)."""

    async def model(prompt: str) -> str:
        try:
            result = await ctx.session.send_request(
                CreateMessageRequest(params=_sampling(prompt)),
                CreateMessageResult,
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
        except (MCPError, ValidationError) as exc:
            raise ModelFailure(f"the client's model did not answer: {exc}") from exc
        answer = _answer_text(result)
        if isinstance(answer, ModelFailure):
            raise answer
        return answer

    return model


def _reported(report: RunReport) -> CallToolResult:
    reflection = report.reflection
    return shaped(
        ReflectOutput(
            batches=len(report.batches),
            reflections_created=sum(b.reflections for b in report.batches),
            memories_consolidated=sum(b.memories for b in report.batches if b.committed),
            stopped=report.stopped,
            failures=[b.failure for b in report.batches if b.failure is not None],
            reflection=reflection,
            consolidation_suggestion=None if reflection is None else reflection.suggestion,
        )
    )


TOOLS = (
    ToolSpec(
        consolidate_memories,
        "Check out memories to consolidate",
        "Start a consolidation: lease the oldest unconsolidated memories (tier 1 into tier "
        "2 reflections; tier=2: tier 2 into tier 3) and get their texts, dates and the "
        "reflection_contract. Write the entries as its instructions say (an entry that "
        "changes a reflection they show as [R1] lists R1 in replaces), then call "
        "commit_reflections before the lease expires. batch_id null: nothing to do.",
        WRITES,
    ),
    ToolSpec(
        commit_reflections,
        "Commit reflections",
        "Finish a consolidation: submit the entries written for a consolidate_memories "
        f"batch, each text plus integer importance {limits.IMPORTANCE_MIN}-"
        f"{limits.IMPORTANCE_MAX} (no ids or numbers in the text). A second commit writes "
        "nothing twice; an expired lease is refused: check out again.",
        WRITES_IDEMPOTENT,
    ),
    ToolSpec(
        reflect_memories,
        "Consolidate memories with your model",
        "Consolidate in one call with your own model (MCP sampling) when "
        "consolidation_suggestion is set or the user asks: up to "
        f"{MAX_BATCHES_PER_TRIGGER} batches, each written by your model from texts, dates "
        "and the contract (never ids), checked and committed. Below the server's threshold "
        "it writes nothing (stopped: below_threshold). "
        "Without sampling, or to consolidate a small vault now, use consolidate_memories.",
        WRITES,
    ),
)
