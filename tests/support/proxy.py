"""The chat proxy in front of a provider double: the running server, and one call in each
provider's format."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
from google import genai
from google.genai import types

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.service import VaultService
from tests.proxy.upstream import Upstream
from tests.support import loopback


@dataclass
class Proxied:
    url: str  # the memory server's origin
    key: str
    service: VaultService
    upstream: Upstream
    upstream_url: str

    def vault(self, method: str, path: str, key: str | None = None, **kwargs: Any) -> Any:
        """A REST call to the vault behind the proxy, as the key's owner makes it."""
        headers = {"Authorization": f"Bearer {key or self.key}"}
        response = httpx2.request(method, self.url + path, headers=headers, timeout=30, **kwargs)
        assert response.is_success, response.text
        return response.json()

    def remember(self, *texts: str, session: str | None = None) -> None:
        messages = [{"role": "user", "content": t} for t in texts]
        body: dict[str, Any] = {"messages": messages}
        if session:
            body["session_id"] = session
        self.vault("POST", "/v1/memory/ingest", json=body)

    def stored_after(self, count: int, seconds: float = 10.0) -> list[dict[str, Any]]:
        """The raw memories once there are ``count`` of them (a proxied turn is stored after
        its response has gone, so a moment after the client has it)."""
        deadline = time.monotonic() + seconds
        while len(rows := self.stored()) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(rows) == count, [r["content"] for r in rows]
        return rows

    def settled(self, count: int) -> list[dict[str, Any]]:
        """The raw memories, checked to be ``count`` once the server has no request in
        flight: a proxied turn is stored before its request's ASGI call returns, so nothing
        more can arrive after that."""
        loopback.quiet(self.url)
        rows = self.stored()
        assert len(rows) == count, [r["content"] for r in rows]
        return rows

    def stored(self, key: str | None = None) -> list[dict[str, Any]]:
        """Every raw memory of the vault, oldest first."""
        body = {"from": "2000-01-01", "order": "oldest_first"}
        page = self.vault("POST", "/v1/memory/date-search", key, json=body)
        return [m for m in page["memories"] if m["tier"] == 1]


def settings_for(data_dir: Path, upstream_url: str, **extra: Any) -> Settings:
    return Settings(
        data_dir=data_dir,
        embeddings="none",
        upstream_openai_url=upstream_url + "/v1",
        upstream_anthropic_url=upstream_url,
        upstream_google_url=upstream_url,
        **extra,
    )


FACT = "My dog is called Biscuit and he loves the beach at Brighton"


QUESTION = "What is my dog called again?"


PROVIDER_KEY = "sk-provider-secret-4f1c9e"


# (path, body) of one call in each format; ``model`` picks the double's scenario
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "openai": (
        "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": QUESTION}]},
    ),
    "anthropic": (
        "/v1/messages",
        {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": QUESTION}]},
    ),
    "google": (
        "/v1beta/models/m:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": QUESTION}]}]},
    ),
}


KEY_HEADERS = {
    "openai": "authorization",
    "anthropic": "x-api-key",
    "google": "x-goog-api-key",
}


def call(
    proxied: Proxied,
    fmt: str,
    *,
    model: str = "m",
    key: str | None = "",
    stream: bool = False,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx2.Response:
    path, default = CALLS[fmt]
    body = json.loads(json.dumps(body or default))
    if fmt == "google":
        path = path.replace("/m:", f"/{model}:")
        if stream:
            path = path.replace(":generateContent", ":streamGenerateContent?alt=sse")
    else:
        body["model"] = model
        if stream:
            body["stream"] = True
    provider = {KEY_HEADERS[fmt]: ("Bearer " if fmt == "openai" else "") + PROVIDER_KEY}
    memory = {"X-Memory-Key": proxied.key if key == "" else key} if key is not None else {}
    return httpx2.post(
        proxied.url + path,
        json=body,
        headers={**provider, **memory, **(headers or {})},
        timeout=30,
    )


def openai_client(base: str, key: str | None, **headers: str) -> openai.OpenAI:
    extra = {"X-Memory-Key": key, **headers} if key else headers
    return openai.OpenAI(
        base_url=base + "/v1", api_key="sk-provider-1", default_headers=extra, max_retries=0
    )


def anthropic_client(base: str, key: str | None, **headers: str) -> anthropic.Anthropic:
    extra = {"X-Memory-Key": key, **headers} if key else headers
    return anthropic.Anthropic(
        base_url=base, api_key="sk-ant-provider-1", default_headers=extra, max_retries=0
    )


def google_client(base: str, key: str | None, **headers: str) -> genai.Client:
    extra = {"X-Memory-Key": key, **headers} if key else headers
    options = types.HttpOptions(base_url=base, headers=extra, api_version="v1")
    return genai.Client(api_key="g-provider-1", http_options=options)
