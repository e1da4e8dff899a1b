"""The calls behind ``consolidate-now`` and ``server-reflector`` (:mod:`.reflector`)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import click
from pydantic import BaseModel

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import MemoryRouterError
from mcp_memoryrouter.words import counted

M = TypeVar("M", bound=BaseModel)
# a run is at most three batches, each up to two provider calls
RUN_SECONDS = 6 * limits.REFLECTOR_CALL_SECONDS + 60


def run_now(api_url: str, key: str, max_tokens: int | None, as_json: bool) -> None:
    body = schemas.ConsolidateRunRequest(max_tokens=max_tokens)
    done = _called(api_url, key, lambda client: client.consolidate_run(body))
    if as_json:
        click.echo(done.model_dump_json())
        return
    click.echo(f"{done.message} (stopped: {done.stopped})")


def server_reflector(api_url: str, key: str, enabled: bool | None, as_json: bool) -> None:
    if enabled is None:
        state = _called(api_url, key, lambda client: client.server_reflector())
    else:
        body = schemas.ServerReflectorRequest(enabled=enabled)
        state = _called(api_url, key, lambda client: client.set_server_reflector(body))
    if as_json:
        click.echo(state.model_dump_json())
        return
    click.echo(_described(state))


def _described(state: schemas.ServerReflector) -> str:
    lines = [
        "the server has a reflector" if state.configured else "the server has no reflector",
        f"for this vault: {'on' if state.enabled else 'off (its owner consolidates)'}",
    ]
    if state.last_run is not None:
        lines.append(
            f"last run: {state.last_run}, {state.last_outcome}, "
            f"{counted(state.last_batches, 'batch', 'batches')}, "
            f"{counted(state.last_reflections, 'reflection', 'reflections')}"
        )
    if state.last_error is not None:
        failures = counted(state.failures, "failure", "failures")
        lines.append(f"last error: {state.last_error} ({failures} in a row)")
    if state.next_run_after is not None:
        lines.append(f"no run on the suggestion before {state.next_run_after}")
    return "\n".join(lines)


def _called(api_url: str, key: str, call: Callable[[VaultClient], Awaitable[M]]) -> M:
    async def main() -> M:
        client = VaultClient(api_url, key, timeout=RUN_SECONDS)
        try:
            return await call(client)
        finally:
            await client.aclose()

    try:
        return anyio.run(main)
    except MemoryRouterError as exc:
        detail = f" {json.dumps(exc.details)}" if exc.details else ""
        raise click.ClickException(f"{exc.message}{detail}") from exc
