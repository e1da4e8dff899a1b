"""A model provider double for the server's reflector: it speaks the OpenAI chat, Anthropic
messages and Google generateContent formats over real HTTP (the upstream seam), records
every request, and answers as :attr:`Provider.mode` says:

    ok       the entries the reflection contract asks for, one per ten memory lines, in the
             format's own answer shape, with the format's usage counts
    500      HTTP 500
    429      HTTP 429 with ``Retry-After: 120``
    slow     an answer after :attr:`Provider.delay` seconds (longer than the server waits),
             unless the server hangs up first
    garbage  HTTP 200 whose body is no answer of the format (and then, prose without entries)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.types import Receive, Scope, Send

from tests.support.upstreams import read_request

MEMORY_LINE = re.compile(r"^(?:\d+\. )?\[(\d{4}-\d{2}-\d{2}T[0-9:.]+Z)\] (.*)$")
TOKENS_IN, TOKENS_OUT = 1234, 56  # the usage every "ok" answer reports


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def prompt(self) -> str:
        """The one user message's text, whatever the format."""
        if "contents" in self.body:
            return str(self.body["contents"][0]["parts"][0]["text"])
        return str(self.body["messages"][0]["content"])


@dataclass
class Provider:
    mode: str = "ok"
    delay: float = 5.0
    received: list[Request] = field(default_factory=list)
    counts: bool = True  # whether answers carry the format's usage counts

    def prompts(self) -> list[str]:
        return [r.prompt for r in self.received]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        read = await read_request(scope, receive, send)
        if read is None:
            return
        headers, raw = read
        request = Request(scope["path"], headers, json.loads(raw))
        self.received.append(request)
        if self.mode == "slow" and await _gone_within(receive, self.delay):
            return  # the server stopped waiting: no one to answer
        status, body, extra = await self._answer(request)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), *extra],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _answer(self, request: Request) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        if self.mode == "500":
            return 500, b'{"error": {"message": "overloaded"}}', []
        if self.mode == "429":
            return 429, b'{"error": {"message": "slow down"}}', [(b"retry-after", b"120")]
        if self.mode == "garbage":
            return 200, b'{"unexpected": "shape"}', []
        answer = shaped(request, json.dumps(entries(request.prompt)), counted=self.counts)
        return 200, json.dumps(answer).encode(), []


async def _gone_within(receive: Receive, seconds: float) -> bool:
    """Whether the client hangs up within ``seconds`` (the request's body is read)."""
    with anyio.move_on_after(seconds):
        while (await receive())["type"] != "http.disconnect":
            pass
        return True
    return False


def entries(prompt: str) -> list[dict[str, object]]:
    lines = [m.groups() for m in map(MEMORY_LINE.match, prompt.splitlines()) if m]
    group = max(10, -(-len(lines) // 100))
    return [
        {
            "text": f"{len(part)} moments from {part[0][0][:10]}, beginning: {part[0][1][:60]}",
            "importance": 1,  # 100 reflections stay below tier 2's threshold
        }
        for part in (lines[i : i + group] for i in range(0, len(lines), group))
    ]


def shaped(request: Request, text: str, *, counted: bool = True) -> dict[str, Any]:
    """``text`` as the answer of the request's format (with its usage counts, ``counted``)."""
    if request.path.endswith(":generateContent"):
        usage = (
            "usageMetadata",
            {"promptTokenCount": TOKENS_IN, "candidatesTokenCount": TOKENS_OUT},
        )
        answer: dict[str, Any] = {
            "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}]
        }
    elif request.path.endswith("/messages"):
        usage = ("usage", {"input_tokens": TOKENS_IN, "output_tokens": TOKENS_OUT})
        answer = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
        }
    else:
        usage = ("usage", {"prompt_tokens": TOKENS_IN, "completion_tokens": TOKENS_OUT})
        answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
    if counted:
        answer[usage[0]] = usage[1]
    return answer
