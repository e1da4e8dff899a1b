"""A provider double that speaks the OpenAI, Anthropic and Google formats over real HTTP and
records every request it receives (the seam the chat proxy is tested through).

Its answers are deterministic (fixed ids and times), so the same request answered directly
and through the proxy gives the same bytes. The model name picks a scenario:
``fail-400`` / ``fail-429`` / ``fail-500`` answer that error in the format's own shape, and
``drop`` starts a stream and breaks the connection half-way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Receive, Scope, Send

from tests.support.upstreams import read_request

ANSWER = "Your dog is called Biscuit, and he loves the beach."
PIECES = ["Your dog ", "is called ", "Biscuit, ", "and he loves ", "the beach."]


@dataclass
class Received:
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Upstream:
    """The ASGI app; ``received`` lists what came in, oldest first."""

    received: list[Received] = field(default_factory=list)

    @property
    def last(self) -> Received:
        return self.received[-1]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        read = await read_request(scope, receive, send)
        if read is None:
            return
        headers, body = read
        path, query = scope["path"], scope["query_string"].decode()
        self.received.append(Received(path, query, headers, body))
        request = json.loads(body) if body else {}
        if path == "/v1/chat/completions":
            await _openai(request, send)
        elif path == "/v1/responses":
            await _openai_responses(request, send)
        elif path == "/v1/embeddings":
            vectors = [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5]}]
            usage = {"prompt_tokens": 2, "total_tokens": 2}
            await _send(
                send, 200, {"object": "list", "data": vectors, "model": "e", "usage": usage}
            )
        elif path == "/v1/models" and "anthropic-version" in headers:
            model = {"type": "model", "id": "claude-test", "display_name": "Claude test"}
            listed = {"data": [{**model, "created_at": "2026-01-01T00:00:00Z"}]}
            await _send(
                send,
                200,
                {**listed, "has_more": False, "first_id": "claude-test", "last_id": "claude-test"},
            )
        elif path.endswith("/models") and "x-goog-api-key" in headers:
            await _send(send, 200, {"models": [{"name": "models/gemini-test"}]})
        elif path == "/v1/models":
            listing: dict[str, Any] = {"id": "gpt-test", "object": "model", "created": 1767225600}
            await _send(send, 200, {"object": "list", "data": [{**listing, "owned_by": "t"}]})
        elif path == "/v1/messages":
            await _anthropic(request, send)
        elif ":generateContent" in path or ":streamGenerateContent" in path:
            model = path.rsplit("/", 1)[1].split(":")[0]
            await _google({**request, "model": model}, ":stream" in path, send)
        else:
            await _send(send, 404, {"error": "no such route"})


async def _send(
    send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"x-request-id", b"req_upstream_1"),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


async def _stream(send: Send, events: list[bytes], *, drop: bool = False) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream; charset=utf-8"),
                (b"cache-control", b"no-cache"),
                (b"x-request-id", b"req_upstream_1"),
            ],
        }
    )
    for at, event in enumerate(events):
        if drop and at == len(events) // 2:
            return  # the response never completes: the server breaks the connection
        await send({"type": "http.response.body", "body": event, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _failure(model: str) -> int | None:
    if model.startswith("fail-"):
        return int(model.removeprefix("fail-"))
    return None


# --- OpenAI -------------------------------------------------------------------------------


async def _openai(request: dict[str, Any], send: Send) -> None:
    model = str(request.get("model", ""))
    status = _failure(model)
    if status:
        error = {"message": f"upstream says {status}", "type": "invalid_request_error"}
        extra = [(b"retry-after", b"7")] if status == 429 else []
        await _send(send, status, {"error": {**error, "param": None, "code": None}}, extra)
        return
    base = {"id": "chatcmpl-1", "created": 1767225600, "model": model}
    if not request.get("stream"):
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": ANSWER, "refusal": None},
            "finish_reason": "stop",
            "logprobs": None,
        }
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        await _send(
            send, 200, {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
        )
        return
    chunk = {**base, "object": "chat.completion.chunk"}
    deltas = [{"role": "assistant", "content": ""}] + [{"content": p} for p in PIECES]
    events = [
        _data({**chunk, "choices": [{"index": 0, "delta": d, "finish_reason": None}]})
        for d in deltas
    ]
    events.append(_data({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    events.append(b"data: [DONE]\n\n")
    await _stream(send, events, drop=model == "drop")


async def _openai_responses(request: dict[str, Any], send: Send) -> None:
    model = str(request.get("model", ""))
    message = {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
    }
    done = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1767225600,
        "status": "completed",
        "model": model,
        "output": [message],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    if not request.get("stream"):
        await _send(send, 200, done)
        return
    started = {**done, "status": "in_progress", "output": []}
    events = [_event("response.created", {"type": "response.created", "response": started})]
    for n, piece in enumerate(PIECES):
        delta = {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": piece,
            "sequence_number": n + 1,
            "logprobs": [],
        }
        events.append(_event("response.output_text.delta", delta))
    completed = {"type": "response.completed", "response": done, "sequence_number": 99}
    events.append(_event("response.completed", completed))
    await _stream(send, events, drop=model == "drop")


def _data(value: Any) -> bytes:
    return b"data: " + json.dumps(value).encode() + b"\n\n"


# --- Anthropic ----------------------------------------------------------------------------


async def _anthropic(request: dict[str, Any], send: Send) -> None:
    model = str(request.get("model", ""))
    status = _failure(model)
    if status:
        kind = {400: "invalid_request_error", 429: "rate_limit_error"}.get(status, "api_error")
        body = {"type": "error", "error": {"type": kind, "message": f"upstream says {status}"}}
        await _send(send, status, body)
        return
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    if not request.get("stream"):
        await _send(send, 200, {**message, "content": [{"type": "text", "text": ANSWER}]})
        return
    start: dict[str, Any] = {**message, "content": [], "stop_reason": None}
    events = [
        _event("message_start", {"type": "message_start", "message": start}),
        _event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        _event("ping", {"type": "ping"}),
        *[
            _event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": p},
                },
            )
            for p in PIECES
        ],
        _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        _event("message_stop", {"type": "message_stop"}),
    ]
    await _stream(send, events, drop=model == "drop")


def _event(name: str, value: Any) -> bytes:
    return f"event: {name}\n".encode() + _data(value)


# --- Google -------------------------------------------------------------------------------


async def _google(request: dict[str, Any], streaming: bool, send: Send) -> None:
    model = str(request["model"])
    status = _failure(model)
    if status:
        names = {400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL"}
        error = {"code": status, "message": f"upstream says {status}", "status": names[status]}
        await _send(send, status, {"error": error})
        return
    usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
    if not streaming:
        whole = {
            "content": {"parts": [{"text": ANSWER}], "role": "model"},
            "finishReason": "STOP",
            "index": 0,
        }
        await _send(
            send, 200, {"candidates": [whole], "usageMetadata": usage, "modelVersion": model}
        )
        return
    events = []
    for at, piece in enumerate(PIECES):
        candidate: dict[str, Any] = {"content": {"parts": [{"text": piece}], "role": "model"}}
        if at == len(PIECES) - 1:
            candidate["finishReason"] = "STOP"
        chunk = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model}
        events.append(b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n")
    await _stream(send, events, drop=model == "drop")
