"""Server-sent events read as they pass (the HTML living standard's event-stream format):
bytes in, in whatever pieces the network cut them, each complete event's data out. The
proxy hands the client every byte as it arrives; this only watches the same bytes to put
the answer together. Pure."""

from __future__ import annotations

import codecs


class EventReader:
    """Feed it bytes; it returns the data of each event those bytes complete."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        self._pending += self._decoder.decode(chunk)
        events: list[str] = []
        while True:
            line, found = _line(self._pending)
            if found is None:
                return events
            self._pending = self._pending[found:]
            if line == "":
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
            elif line.startswith("data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(" ") else value)
            # event:, id:, retry: and comments carry nothing the answer needs


def _line(text: str) -> tuple[str, int | None]:
    """The first line of ``text`` and where the next begins (CR, LF or CRLF ends a line);
    None when no line is complete yet (a lone CR at the end may still be half a CRLF)."""
    for at, char in enumerate(text):
        if char == "\n":
            return text[:at], at + 1
        if char == "\r":
            if at + 1 == len(text):
                return "", None
            return text[:at], at + (2 if text[at + 1] == "\n" else 1)
    return "", None
