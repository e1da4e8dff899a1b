"""Numbers in words: ``1 memory``, ``0 memories`` — the count and the noun that agrees with
it, for every message a person reads (the CLI, the explorer, the API's messages)."""

from __future__ import annotations


def counted(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"
