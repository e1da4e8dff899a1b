"""Model adapters: the text-in, text-out function in the middle of the loop.

A :data:`Model` takes the model input and returns the model's answer. Two adapters ship:
a command (the input on stdin, the answer on stdout) and any OpenAI-compatible chat
endpoint. Either raises :class:`ModelFailure` when no answer comes back.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import httpx2
from anyio.abc import ByteReceiveStream

from mcp_memoryrouter.errors import ModelFailure

Model = Callable[[str], Awaitable[str]]
DEFAULT_TIMEOUT = 600.0
MODEL_KEY_ENV = ("MEMORYROUTER_MODEL_KEY", "OPENAI_API_KEY")
_STDERR_TAIL = 500


class CommandModel:
    """Runs ``command`` (split like a shell would, never through one) once per call."""

    def __init__(
        self,
        command: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """``env`` is the command's whole environment (default: this process's)."""
        self._argv = shlex.split(command)
        if not self._argv:
            raise ValueError("the model command is empty")
        self._timeout = timeout
        self._env = None if env is None else dict(env)

    async def __call__(self, prompt: str) -> str:
        """The command's answer. Cancelled (a stopping ``auto --watch``) or out of time, the
        command is killed: it never runs on, spending inference nobody will read."""
        try:
            with anyio.fail_after(self._timeout):
                status, out, err = await _run(self._argv, self._env, prompt)
        except TimeoutError as exc:
            raise ModelFailure(
                f"the model command gave no answer within {self._timeout:g} s"
            ) from exc
        except OSError as exc:
            raise ModelFailure(
                f"cannot run the model command {self._argv[0]!r}: {type(exc).__name__}: {exc}"
            ) from exc
        stdout = out.decode("utf-8", errors="replace")
        if status != 0:
            # Some commands say why on stdout (Claude Code's ``claude -p`` when signed out)
            stderr = err.decode("utf-8", errors="replace")
            tail = (stderr.strip() or stdout.strip())[-_STDERR_TAIL:]
            raise ModelFailure(f"the model command exited with status {status}: {tail}")
        return stdout


async def _run(
    argv: list[str], env: dict[str, str] | None, prompt: str
) -> tuple[int, bytes, bytes]:
    """Run ``argv`` with ``prompt`` on stdin: its exit status, stdout and stderr. Leaving
    early (cancelled, out of time) kills the process. A command that exits without reading
    all of its input is answered by what it printed, as ``subprocess.run`` would."""
    out, err = bytearray(), bytearray()

    async def drain(stream: ByteReceiveStream | None, into: bytearray) -> None:
        if stream is not None:
            async for chunk in stream:
                into.extend(chunk)

    process = await anyio.open_process(argv, env=env)
    async with process, anyio.create_task_group() as group:
        group.start_soon(drain, process.stdout, out)
        group.start_soon(drain, process.stderr, err)
        if process.stdin is not None:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.send(prompt.encode("utf-8", errors="replace"))
            await process.stdin.aclose()
        status = await process.wait()
    return status, bytes(out), bytes(err)


def chat_completions_url(base_url: str) -> str:
    """``{base}/v1/chat/completions``; a base that already ends in ``/v1`` is not doubled."""
    base = base_url.rstrip("/")
    return f"{base}/chat/completions" if base.endswith("/v1") else f"{base}/v1/chat/completions"


def model_key_from(environ: Mapping[str, str]) -> str | None:
    """The chat endpoint's key: MEMORYROUTER_MODEL_KEY, else OPENAI_API_KEY."""
    return next((environ[name] for name in MODEL_KEY_ENV if environ.get(name)), None)


class ChatModel:
    """One user message per call to an OpenAI-compatible ``/v1/chat/completions``."""

    def __init__(
        self,
        base_url: str,
        model: str,
        key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self._url = chat_completions_url(base_url)
        self._model = model
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx2.AsyncClient(transport=transport, timeout=timeout)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __call__(self, prompt: str) -> str:
        body = {"model": self._model, "messages": [{"role": "user", "content": prompt}]}
        try:
            response = await self._http.post(self._url, json=body, headers=self._headers)
        except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
            raise ModelFailure(
                f"cannot reach the model at {self._url}: {type(exc).__name__}: {exc}"
            ) from exc
        if response.status_code >= 400:
            raise ModelFailure(f"the model endpoint answered HTTP {response.status_code}")
        return _message_content(response)


def _message_content(response: httpx2.Response) -> str:
    try:
        body: Any = response.json()
        content = body["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ModelFailure(
            f"the model endpoint answered no chat message: {type(exc).__name__}"
        ) from exc
    if not isinstance(content, str):
        raise ModelFailure("the model endpoint answered a message without text content")
    return content
