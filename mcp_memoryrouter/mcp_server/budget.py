"""The result budget: every tool result, as the host receives it (the structured content
plus its JSON text copy), stays within a number of tokens counted with the package's one
estimate (:func:`mcp_memoryrouter.tokens.est_tokens`).

Tools fit their answer to it: long texts are trimmed with a marker that says how to read the
whole text, and rows that do not fit are left out and counted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from mcp_memoryrouter.tokens import est_tokens

MIN_SNIPPET = 300  # characters a trimmed text keeps, however many rows share the budget
ROW_CHARS = 200  # characters of a row besides its text (id, tier, dates, keys)
ENVELOPE = 64  # tokens around a result: the JSON-RPC response, the SDK's _meta and resultType
SETTING = "MEMORYROUTER_MCP_RESULT_TOKENS"
R = TypeVar("R")


@dataclass(frozen=True)
class ResultBudget:
    tokens: int

    def cost(self, result: CallToolResult) -> int:
        """The estimate of ``result`` as it goes over the wire."""
        return est_tokens(result.model_dump_json(by_alias=True, exclude_none=True))

    def fits(self, result: CallToolResult) -> bool:
        return self.cost(result) + ENVELOPE <= self.tokens

    def content_tokens(self, requested: int | None = None, reserved: int = 0) -> int:
        """How many tokens of memory text to ask the vault for (``requested`` at most): the
        text goes out twice, and keys, dates and ``reserved`` tokens take their part too."""
        room = max(0, self.tokens - reserved) * 2 // 5
        return room if requested is None else min(requested, room)

    def text_share(self, rows: int) -> int:
        """Characters each of ``rows`` texts may keep for all of them to fit (each text is
        sent twice: in the structured content and in its text copy)."""
        per_copy = self.tokens * 4 // 2
        return max(MIN_SNIPPET, per_copy // max(rows, 1) - ROW_CHARS)


def shaped(payload: BaseModel) -> CallToolResult:
    """The result of a tool: ``payload`` as structured content and as compact JSON text. A
    top-level field without a value is left out, as the published output schema, which names
    no null, has it optional (``catalog_schema.py``)."""
    dumped = payload.model_dump(mode="json", by_alias=True)
    structured = {name: value for name, value in dumped.items() if value is not None}
    text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured
    )


def trim(text: str, cap: int, how: str) -> str:
    """``text`` cut to ``cap`` characters with a marker naming what was cut and ``how`` to
    read the whole text."""
    if len(text) <= cap:
        return text
    return f"{text[:cap].rstrip()} [trimmed: {len(text) - cap} more characters; {how}]"


def whole_by(tool: str, memory_id: str) -> str:
    return f"{tool} {memory_id} returns the whole text"


def over_budget(tokens: int) -> str:
    return f"the whole text does not fit this server's {tokens}-token result budget ({SETTING})"


def largest_fit(count: int, build: Callable[[int], R], fits: Callable[[R], bool]) -> R:
    """``build(k)`` for the largest ``k`` (0 to ``count`` leading rows) that ``fits``."""
    full = build(count)
    if count == 0 or fits(full):
        return full
    low, high = 0, count - 1  # build(count) does not fit; the answer lies in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if fits(build(middle)):
            low = middle
        else:
            high = middle - 1
    return build(low)
