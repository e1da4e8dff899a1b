"""Server-sent events read as they pass (the HTML living standard's event-stream format):
bytes in, in whatever pieces the network cut them, each complete event's data out. The
proxy hands the client every byte as it arrives; this only watches the same bytes to put
the answer together. Pure.

Each byte is looked at once, whatever the size of a line or of the pieces it comes in (a
line is kept as its pieces until its end arrives), and what is held for one line or one
event is capped: a stream that passes the cap is still relayed whole, but no longer read
(``overflowed``), so its answer is not stored.
"""

from __future__ import annotations

import codecs
import re

from mcp_memoryrouter import limits

# CR, LF or CRLF ends a line; a CR at the end of a piece may be half a CRLF
_BREAK = re.compile(r"\r\n|\r|\n")


class EventReader:
    """Feed it bytes; it returns the data of each event those bytes complete."""

    def __init__(self, max_chars: int = limits.PROXY_MAX_ANSWER_BYTES) -> None:
        """``max_chars``: the most one line, or one event's data, may hold."""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._max = max_chars
        self._pieces: list[str] = []  # the line not yet ended
        self._held = 0  # characters in _pieces and _data
        self._data: list[str] = []
        self._after_cr = False
        self.overflowed = False

    def feed(self, chunk: bytes) -> list[str]:
        if self.overflowed:
            return []
        text = self._decoder.decode(chunk)
        if not text:
            return []
        if self._after_cr and text.startswith("\n"):
            text = text[1:]  # the second half of a CRLF cut between two pieces
        self._after_cr = text.endswith("\r")
        events: list[str] = []
        start = 0
        for found in _BREAK.finditer(text):
            self._pieces.append(text[start : found.start()])
            line = "".join(self._pieces)
            self._pieces = []
            self._held -= len(line)
            self._line(line, events)
            start = found.end()
        rest = text[start:]
        if rest:
            self._pieces.append(rest)
            self._held += len(rest)
        if self._held > self._max:
            self._overflow()
        return events

    def _line(self, line: str, events: list[str]) -> None:
        if line == "":
            if self._data:
                events.append("\n".join(self._data))
                self._data = []
                self._held = sum(map(len, self._pieces))
        elif line.startswith("data:"):
            value = line[5:]
            value = value[1:] if value.startswith(" ") else value
            self._data.append(value)
            self._held += len(value)
        # event:, id:, retry: and comments carry nothing the answer needs

    def _overflow(self) -> None:
        self.overflowed = True
        self._pieces, self._data, self._held = [], [], 0
