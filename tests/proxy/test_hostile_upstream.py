"""A provider that answers with too much, or in shapes meant to stall a parser: the proxy
reads each byte once, holds at most its cap of an answer, still relays every byte to the
app, and stores nothing it could not read whole."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from starlette.types import Receive, Scope, Send

from mcp_memoryrouter.app import create_server
from mcp_memoryrouter.proxy.events import EventReader
from tests.support import live_server
from tests.support.proxy import settings_for

MIB = 1024 * 1024
CAP = MIB  # the answer cap the server under test is given
QUESTION = "Where did we park the boat last summer?"


@dataclass
class Hostile:
    """An OpenAI-shaped upstream whose answer is ``answer`` bytes, in ``piece``-byte writes."""

    answer: bytes = b""
    content_type: bytes = b"application/json"
    piece: int = 64 * 1024

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", self.content_type)]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for at in range(0, len(self.answer), self.piece):
            chunk = self.answer[at : at + self.piece]
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


@dataclass
class Proxy:
    url: str
    key: str
    upstream: Hostile

    def call(self, stream: bool = False) -> httpx2.Response:
        body: dict[str, object] = {
            "model": "m",
            "messages": [{"role": "user", "content": QUESTION}],
        }
        if stream:
            body["stream"] = True
        headers = {"X-Memory-Key": self.key, "Authorization": "Bearer sk-1"}
        return httpx2.post(
            self.url + "/v1/chat/completions", json=body, headers=headers, timeout=60
        )

    def stored(self) -> list[str]:
        page = httpx2.post(
            self.url + "/v1/memory/date-search",
            json={"from": "2000-01-01"},
            headers={"X-Memory-Key": self.key},
            timeout=30,
        )
        return [m["content"] for m in page.json()["memories"]]

    def settled(self) -> list[str]:
        """What is stored, once a stored turn would have landed."""
        time.sleep(0.5)
        return self.stored()


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Proxy]:
    upstream = Hostile()
    with live_server(upstream) as upstream_url:
        settings = settings_for(tmp_path, upstream_url, proxy_max_answer_bytes=CAP)
        server = create_server(settings)
        assert server.service is not None
        key, _ = server.service.create_vault()
        with live_server(server.app, lifespan="on") as url:
            yield Proxy(url, key, upstream)


def whole(text: str) -> bytes:
    answer = {"choices": [{"message": {"role": "assistant", "content": text}}]}
    return json.dumps(answer).encode()


def streamed(text: str) -> bytes:
    delta = {"choices": [{"delta": {"content": text}, "finish_reason": "stop"}]}
    return b"data: " + json.dumps(delta).encode() + b"\n\ndata: [DONE]\n\n"


def test_an_answer_within_the_cap_is_stored(proxy: Proxy) -> None:
    proxy.upstream.answer = whole("By the old lighthouse.")
    assert proxy.call().status_code == 200
    deadline = time.monotonic() + 10
    while len(proxy.stored()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(proxy.stored()) == sorted([QUESTION, "By the old lighthouse."])


def test_a_whole_answer_over_the_cap_reaches_the_app_byte_for_byte_and_is_not_stored(
    proxy: Proxy,
) -> None:
    proxy.upstream.answer = whole("x" * (5 * CAP))
    answer = proxy.call()
    assert answer.status_code == 200
    assert answer.content == proxy.upstream.answer
    assert proxy.settled() == []


def test_a_stream_whose_line_passes_the_cap_is_relayed_whole_and_not_stored(
    proxy: Proxy,
) -> None:
    proxy.upstream.content_type = b"text/event-stream"
    proxy.upstream.answer = streamed("y" * (4 * CAP))
    proxy.upstream.piece = 4096
    answer = proxy.call(stream=True)
    assert answer.status_code == 200
    assert answer.content == proxy.upstream.answer
    assert proxy.settled() == []


@pytest.mark.timeout(20)
def test_a_four_mib_line_in_small_pieces_is_read_in_linear_time() -> None:
    """Each byte is looked at once: the 4 MiB line that kept the event loop busy for 48 s
    (each piece rescanned the whole line so far) takes a few milliseconds of work."""
    reader = EventReader(max_chars=64 * MIB)
    line = b"data: " + b"z" * (4 * MIB)
    for at in range(0, len(line), 1024):
        assert reader.feed(line[at : at + 1024]) == []
    assert reader.feed(b"\n\n") == ["z" * (4 * MIB)]


def test_a_line_over_the_readers_cap_stops_the_reading_not_the_stream() -> None:
    reader = EventReader(max_chars=1000)
    assert reader.feed(b"data: " + b"a" * 2000) == []
    assert reader.overflowed
    assert reader.feed(b"\n\ndata: later\n\n") == []
