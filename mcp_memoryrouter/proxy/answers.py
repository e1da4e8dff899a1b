"""A provider's answer put together from its bytes as they pass through the proxy: a
server-sent event stream read event by event (linear in its bytes), or a whole answer's
bytes held up to a cap. Either holds at most the cap; what is larger is relayed to the app
but never stored. Work on a large event or answer runs on a worker thread."""

from __future__ import annotations

import json
from typing import Any, Protocol

import anyio.to_thread

from mcp_memoryrouter.proxy.events import EventReader
from mcp_memoryrouter.proxy.formats import Assembly, Format

OFF_LOOP_CHARS = 256 * 1024  # an event or answer larger than this is read on a worker thread


def reader_for(content_type: str, fmt: Format, cap: int) -> Answer:
    """The reader of an answer sent as ``content_type``."""
    if content_type.startswith("text/event-stream"):
        return Streamed(fmt, cap)
    return Whole(fmt, cap)


class Answer(Protocol):
    """How a provider's answer is put together from its bytes as they pass."""

    async def take(self, chunk: bytes) -> None: ...

    async def text(self) -> str | None:
        """The answer's text once the bytes have ended; None when there is nothing to
        store (an answer cut short, failed or over the cap)."""


class Streamed:
    """A server-sent event stream: events read as they end (linear in the bytes); one over
    ``OFF_LOOP_CHARS`` is read on a worker thread."""

    def __init__(self, fmt: Format, cap: int) -> None:
        self._format = fmt
        self._reader = EventReader(cap)
        self._assembly = Assembly()
        self._cap = cap
        self._held = 0
        self._over = False

    async def take(self, chunk: bytes) -> None:
        if self._over:
            return
        for event in self._reader.feed(chunk):
            if len(event) > OFF_LOOP_CHARS:
                await anyio.to_thread.run_sync(self._format.feed, self._assembly, event)
            else:
                self._format.feed(self._assembly, event)
        self._held = sum(map(len, self._assembly.parts))
        if self._held > self._cap or self._reader.overflowed:
            self._over = True
            self._assembly.parts.clear()

    async def text(self) -> str | None:
        done = self._assembly.complete and not self._assembly.failed
        return self._assembly.text if done and not self._over else None


class Whole:
    """A whole (non-streamed) answer: its bytes held up to the cap, read once they end (on
    a worker thread when large)."""

    def __init__(self, fmt: Format, cap: int) -> None:
        self._format = fmt
        self._chunks: list[bytes] = []
        self._held = 0
        self._cap = cap

    async def take(self, chunk: bytes) -> None:
        if self._held > self._cap:
            return
        self._held += len(chunk)
        if self._held > self._cap:
            self._chunks.clear()  # over the cap: relayed, never held
        else:
            self._chunks.append(chunk)

    async def text(self) -> str | None:
        if self._held > self._cap:
            return None
        content = b"".join(self._chunks)

        def read() -> str:
            return self._format.answer(parsed(content))

        if len(content) > OFF_LOOP_CHARS:
            return await anyio.to_thread.run_sync(read)
        return read()


def parsed(content: bytes) -> Any:
    try:
        return json.loads(content)
    except (ValueError, RecursionError):  # not JSON, or nested past what the parser follows
        return None
