"""A double of the Anthropic Messages API on loopback, for running the real Claude Code CLI.

Claude Code reaches it through ``ANTHROPIC_BASE_URL`` with any ``ANTHROPIC_API_KEY``. Every
``POST /v1/messages`` is recorded and answered by ``respond(body)``: a :class:`Text` or a
:class:`ToolUse`, streamed as server-sent events when the request asks for a stream (Claude Code
does), as one JSON message otherwise. Anything else is answered 404.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict[str, Any]


Reply = Text | ToolUse
Respond = Callable[[dict[str, Any]], Reply]


@dataclass
class MessagesApi:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)


def user_text(body: dict[str, Any]) -> str:
    """The text of the request's last user message (its text blocks, joined)."""
    last = body["messages"][-1]
    content = last["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    content = body["messages"][-1]["content"]
    return [] if isinstance(content, str) else [b for b in content if b["type"] == "tool_result"]


def _events(body: dict[str, Any], reply: Reply, number: int) -> list[dict[str, Any]]:
    start = {
        "type": "message_start",
        "message": {
            "id": f"msg_double_{number}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    }
    if isinstance(reply, Text):
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": reply.text}
        stop = "end_turn"
    else:
        block = {"type": "tool_use", "id": f"toolu_double_{number}", "name": reply.name}
        block["input"] = {}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(reply.input)}
        stop = "tool_use"
    return [
        start,
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]


def _message(body: dict[str, Any], reply: Reply, number: int) -> dict[str, Any]:
    if isinstance(reply, Text):
        content: dict[str, Any] = {"type": "text", "text": reply.text}
        stop = "end_turn"
    else:
        content = {
            "type": "tool_use",
            "id": f"toolu_double_{number}",
            "name": reply.name,
            "input": reply.input,
        }
        stop = "tool_use"
    return {
        "id": f"msg_double_{number}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude"),
        "content": [content],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


@contextmanager
def messages_api(respond: Respond) -> Iterator[MessagesApi]:
    api = MessagesApi("")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            if self.path.split("?")[0] != "/v1/messages":
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            body: dict[str, Any] = json.loads(raw)
            with lock:
                api.requests.append(body)
                number = len(api.requests)
            reply = respond(body)
            if body.get("stream"):
                data = "".join(
                    f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
                    for event in _events(body, reply, number)
                ).encode()
                kind = "text/event-stream"
            else:
                data = json.dumps(_message(body, reply, number)).encode()
                kind = "application/json"
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
