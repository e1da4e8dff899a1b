"""Options the consolidation commands share: where the vault is, which model writes.

Read by every command's ``--help``, so it imports click and the standard library alone:
the client and the model adapters are for the commands' work (``archive``, ``consolidate``).
"""

from __future__ import annotations

import functools
import os
import shlex
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import click
from click.core import ParameterSource

from mcp_memoryrouter.errors import MemoryRouterError

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_API_URL = "http://127.0.0.1:8787"
MODEL_TIMEOUT = 600.0  # seconds: reflect.models.DEFAULT_TIMEOUT (a test holds them equal)
WATCH_SECONDS = 300.0  # auto --watch: reflect.auto.DEFAULT_WATCH_SECONDS (held equal too)


KEY_FILE_MAX_BYTES = 4096  # a memory key is under 100 characters


_VAULT_OPTIONS = (
    click.option(
        "--api-url",
        envvar="MEMORYROUTER_API_URL",
        default=DEFAULT_API_URL,
        show_default=True,
        show_envvar=True,
        help="The MemoryRouter REST API, local or remote.",
    ),
    click.option(
        "--key",
        envvar="MEMORYROUTER_KEY",
        show_envvar=True,
        help="The memory key of the vault (read-write to consolidate or import). Prefer the "
        "environment variable or --key-file: a key typed here is visible to every user of "
        "the machine (ps), and gets a warning.",
    ),
    click.option(
        "--key-file",
        envvar="MEMORYROUTER_KEY_FILE",
        show_envvar=True,
        type=click.Path(dir_okay=False, path_type=Path),
        help="Read the memory key from this file (its first and only line). The file must be "
        "readable by you alone: one that group or others may read is refused (chmod 600 it).",
    ),
)


def vault_options(command: F) -> F:
    """Add where the vault is and its key, and hand the command ``api_url`` and one
    ``key: str`` (from --key-file, MEMORYROUTER_KEY or --key)."""

    @functools.wraps(command)
    def with_key(*args: Any, key: str | None, key_file: Path | None, **kwargs: Any) -> Any:
        return command(*args, key=_the_key(key, key_file), **kwargs)

    wrapped: Callable[..., Any] = with_key
    for option in reversed(_VAULT_OPTIONS):
        wrapped = option(wrapped)
    return cast(F, wrapped)


def _the_key(key: str | None, key_file: Path | None) -> str:
    """The one key given: on the command line before the environment; a key and a key
    file given the same way is a usage error."""
    context = click.get_current_context()
    key_typed = context.get_parameter_source("key") is ParameterSource.COMMANDLINE
    file_typed = context.get_parameter_source("key_file") is ParameterSource.COMMANDLINE
    if key is not None and key_file is not None and key_typed == file_typed:
        raise click.UsageError(
            "give the memory key one way: MEMORYROUTER_KEY or --key-file "
            "(MEMORYROUTER_KEY_FILE), not both"
        )
    if key_file is not None and (key is None or file_typed):
        return read_key_file(key_file)
    if key is None:
        raise click.UsageError(
            "no memory key: set MEMORYROUTER_KEY, or give --key-file PATH (a file only you "
            "can read)"
        )
    if key_typed:
        click.echo(
            "warning: a key given with --key is visible to every user of this machine (ps); "
            "set MEMORYROUTER_KEY or use --key-file PATH instead",
            err=True,
        )
    return key


def read_key_file(path: Path) -> str:
    """The key in ``path``; refused when group or others may read the file, or when it
    holds anything but one key."""
    try:
        with path.open("rb") as file:
            mode = stat.S_IMODE(os.fstat(file.fileno()).st_mode)
            data = file.read(KEY_FILE_MAX_BYTES + 1)
    except OSError as exc:
        raise _bad_key_file(f"cannot read {path}: {type(exc).__name__}: {exc}") from exc
    if mode & 0o044:
        raise _bad_key_file(
            f"{path} can be read by other users (mode {mode:04o}): a memory key file must be "
            f"yours alone; run `chmod 600 {path}` (and make a new key if others read it)"
        )
    try:
        key = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        key = ""
    if len(data) > KEY_FILE_MAX_BYTES or not key or any(c.isspace() for c in key):
        raise _bad_key_file(f"{path} does not hold one memory key (mk_..., on one line)")
    return key


def _bad_key_file(message: str) -> click.BadParameter:
    return click.BadParameter(message, param_hint="--key-file")


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
                argv = shlex.split(self.command)  # as reflect.models.CommandModel splits it
            except ValueError as exc:
                raise click.UsageError(f"--model-cmd: {exc}") from exc
            if not argv:
                raise click.UsageError("--model-cmd: the model command is empty")


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
        default=MODEL_TIMEOUT,
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
