"""The server's reflector's model: one provider call per model input, in the format the
operator names (``MEMORYROUTER_REFLECTOR_FORMAT``), the answers read as the chat proxy reads
them (:mod:`mcp_memoryrouter.proxy.formats`).

A call that brings no text back (unreachable, slow, an HTTP error, a 429, a body without an
answer) raises :class:`ProviderFailure`, naming the ``Retry-After`` a 429 asked for; its
message names the provider's URL and status, never the key. The tokens each answered call
cost (the provider's own count when it gives one, else the estimate) are kept in
:attr:`Metered.calls`, for usage.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx2

from mcp_memoryrouter import limits
from mcp_memoryrouter.errors import ConfigError, ModelFailure
from mcp_memoryrouter.proxy.formats import AnthropicMessages, Format, GoogleGenerate, OpenAIChat
from mcp_memoryrouter.tokens import est_tokens

ProviderFormat = Literal["openai", "anthropic", "google"]
ANTHROPIC_VERSION = "2023-06-01"
_FORMATS: dict[str, Format] = {
    "openai": OpenAIChat(),
    "anthropic": AnthropicMessages(),
    "google": GoogleGenerate(),
}
# Where each format's answer says what it cost: (the usage object, its input and output
# counts).
_USAGE = {
    "openai": ("usage", "prompt_tokens", "completion_tokens"),
    "anthropic": ("usage", "input_tokens", "output_tokens"),
    "google": ("usageMetadata", "promptTokenCount", "candidatesTokenCount"),
}


class ProviderFailure(ModelFailure):
    """The provider gave no answer; ``retry_after``: the seconds its 429 asked to wait."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message, {} if retry_after is None else {"retry_after": retry_after})
        self.retry_after = retry_after


@dataclass(frozen=True)
class Provider:
    """The model the operator gave the server (``MEMORYROUTER_REFLECTOR_*``)."""

    url: str
    format: ProviderFormat
    model: str
    key: str | None = field(default=None, repr=False)
    timeout: float = limits.REFLECTOR_CALL_SECONDS

    def endpoint(self) -> str:
        """The URL one call posts to: ``{base}/v1/chat/completions``, ``{base}/v1/messages``
        or ``{base}/v1beta/models/{model}:generateContent`` (a base that already ends in the
        version is not doubled)."""
        base = self.url.rstrip("/")
        if self.format == "google":
            version = "" if base.endswith(("/v1beta", "/v1")) else "/v1beta"
            return f"{base}{version}/models/{self.model}:generateContent"
        version = "" if base.endswith("/v1") else "/v1"
        path = "/chat/completions" if self.format == "openai" else "/messages"
        return f"{base}{version}{path}"

    def request(self, prompt: str) -> tuple[dict[str, str], dict[str, Any]]:
        """The headers and body of one call asking ``prompt`` (one user message)."""
        headers: dict[str, str] = {}
        shape = _FORMATS[self.format]
        if self.key:
            headers[shape.provider_key_header] = shape.provider_key_prefix + self.key
        if self.format == "google":
            return headers, {"contents": [{"role": "user", "parts": [{"text": prompt}]}]}
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
        }
        if self.format == "anthropic":
            headers["anthropic-version"] = ANTHROPIC_VERSION
            body["max_tokens"] = limits.REFLECTOR_ANSWER_TOKENS
        return headers, body


def key_from_file(path: Path) -> str:
    """The provider key kept in ``path``: a file only the server's user may read (0600);
    one that others may read is refused, so the operator notices before the key leaks."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(
            f"MEMORYROUTER_REFLECTOR_KEY_FILE cannot be read ({type(exc).__name__}): {path}"
        ) from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"MEMORYROUTER_REFLECTOR_KEY_FILE {path} may be read by others "
            f"(mode {stat.S_IMODE(mode):04o}): chmod 600 it"
        )
    if not text:
        raise ConfigError(f"MEMORYROUTER_REFLECTOR_KEY_FILE {path} is empty")
    return text


class ProviderModel:
    """Calls the provider over HTTP, one pool for the server's life."""

    def __init__(
        self, provider: Provider, *, transport: httpx2.AsyncBaseTransport | None = None
    ) -> None:
        self.provider = provider
        self._url = provider.endpoint()
        self._http = httpx2.AsyncClient(transport=transport, timeout=provider.timeout)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def ask(self, prompt: str) -> tuple[str, int, int]:
        """The answer's text, and the tokens sent and received."""
        headers, body = self.provider.request(prompt)
        try:
            response = await self._http.post(self._url, json=body, headers=headers)
        except httpx2.TimeoutException as exc:
            raise ProviderFailure(
                f"the model provider at {self._url} gave no answer within "
                f"{self.provider.timeout:g} s ({type(exc).__name__})"
            ) from exc
        except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
            raise ProviderFailure(
                f"cannot reach the model provider at {self._url}: {type(exc).__name__}"
            ) from exc
        if response.status_code == 429:
            wait = _seconds(response.headers.get("retry-after"))
            raise ProviderFailure(
                f"the model provider at {self._url} is rate limiting (HTTP 429"
                + ("" if wait is None else f", Retry-After {wait:g} s")
                + ")",
                wait,
            )
        if response.status_code >= 400:
            raise ProviderFailure(
                f"the model provider at {self._url} answered HTTP {response.status_code}"
            )
        return self._read(response, prompt)

    def _read(self, response: httpx2.Response, prompt: str) -> tuple[str, int, int]:
        try:
            answer: Any = response.json()
        except ValueError as exc:
            raise ProviderFailure(f"the model provider at {self._url} answered no JSON") from exc
        text = _FORMATS[self.provider.format].answer(answer)
        if not text:
            raise ProviderFailure(
                f"the model provider at {self._url} answered no text "
                f"(not a {self.provider.format} answer?)"
            )
        sent, received = _usage(answer, self.provider.format)
        return text, sent or est_tokens(prompt), received or est_tokens(text)


class Metered:
    """A :data:`~mcp_memoryrouter.reflect.models.Model` for one run: each answered call's
    tokens are kept in :attr:`calls` (sent, received)."""

    def __init__(self, model: ProviderModel) -> None:
        self._model = model
        self.calls: list[tuple[int, int]] = []
        self.retry_after: float | None = None  # what the last 429 asked for

    async def __call__(self, prompt: str) -> str:
        try:
            text, sent, received = await self._model.ask(prompt)
        except ProviderFailure as exc:
            self.retry_after = exc.retry_after
            raise
        self.calls.append((sent, received))
        return text


def _usage(answer: object, format: ProviderFormat) -> tuple[int, int]:
    """The provider's own count of the tokens in and out, 0 where it gives none."""
    where, sent, received = _USAGE[format]
    usage = answer.get(where) if isinstance(answer, dict) else None
    if not isinstance(usage, dict):
        return 0, 0
    return _count(usage.get(sent)), _count(usage.get(received))


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _seconds(value: str | None) -> float | None:
    """A ``Retry-After`` in seconds (its delay-seconds form; a date is not read)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return None if seconds is None or seconds < 0 else seconds
