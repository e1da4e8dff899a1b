"""Options the consolidation commands share: where the vault is, which model writes."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import MemoryRouterError
from mcp_memoryrouter.reflect.models import (
    DEFAULT_TIMEOUT,
    ChatModel,
    CommandModel,
    Model,
    model_key_from,
)

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_API_URL = "http://127.0.0.1:8787"


def vault_options(command: F) -> F:
    command = click.option(
        "--key",
        envvar="MEMORYROUTER_KEY",
        required=True,
        show_envvar=True,
        help="The memory key of the vault (read-write to consolidate or import).",
    )(command)
    return click.option(
        "--api-url",
        envvar="MEMORYROUTER_API_URL",
        default=DEFAULT_API_URL,
        show_default=True,
        show_envvar=True,
        help="The MemoryRouter REST API, local or remote.",
    )(command)


def vault_failure(exc: MemoryRouterError) -> click.ClickException:
    return click.ClickException(f"{type(exc).__name__}: {exc.message}")


@dataclass(frozen=True)
class ModelSpec:
    """The model the user chose: a command, or a chat endpoint and a model name."""

    command: str | None
    url: str | None
    name: str | None
    timeout: float

    def check(self) -> None:
        if (self.command is None) == (self.url is None):
            raise click.UsageError("give exactly one of --model-cmd and --model-url")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise click.UsageError("--model-url must be an http:// or https:// URL")
        if self.url is not None and not self.name:
            raise click.UsageError("--model-url needs --model NAME")
        if self.command is not None:
            try:
                CommandModel(self.command)
            except ValueError as exc:
                raise click.UsageError(f"--model-cmd: {exc}") from exc


_MODEL_OPTIONS = (
    click.option(
        "--model-cmd",
        help="A command that reads the model input on stdin and prints the answer.",
    ),
    click.option(
        "--model-url",
        help="An OpenAI-compatible base URL (POST {url}/v1/chat/completions); the key "
        "comes from MEMORYROUTER_MODEL_KEY or OPENAI_API_KEY.",
    ),
    click.option("--model", "model_name", help="The model name for --model-url."),
    click.option(
        "--model-timeout",
        type=click.FloatRange(min=1),
        default=DEFAULT_TIMEOUT,
        show_default=True,
        help="Seconds to wait for one answer.",
    ),
)


def model_options(command: Callable[..., None]) -> Callable[..., None]:
    """Add the model options and hand the command one checked ``model: ModelSpec``."""

    @functools.wraps(command)
    def with_model(
        *args: Any,
        model_cmd: str | None,
        model_url: str | None,
        model_name: str | None,
        model_timeout: float,
        **kwargs: Any,
    ) -> None:
        spec = ModelSpec(model_cmd, model_url, model_name, model_timeout)
        spec.check()
        command(*args, model=spec, **kwargs)

    wrapped: Callable[..., None] = with_model
    for option in reversed(_MODEL_OPTIONS):
        wrapped = option(wrapped)
    return wrapped


@contextlib.asynccontextmanager
async def opened(
    api_url: str, key: str, spec: ModelSpec
) -> AsyncIterator[tuple[VaultClient, Model]]:
    """The vault client and the model, closed on the way out."""
    client = VaultClient(api_url, key)
    try:
        if spec.command is not None:
            yield client, CommandModel(spec.command, timeout=spec.timeout)
            return
        chat = ChatModel(
            spec.url or "", spec.name or "", model_key_from(os.environ), timeout=spec.timeout
        )
        try:
            yield client, chat
        finally:
            await chat.aclose()
    finally:
        await client.aclose()
