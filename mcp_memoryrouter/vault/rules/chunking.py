"""Splitting long messages into raw memories of about 300 tokens with a small overlap."""

from __future__ import annotations

import re

from mcp_memoryrouter.tokens import est_tokens

SPLIT_ABOVE_TOKENS = 450
TARGET_TOKENS = 300
OVERLAP_TOKENS = 30
_CHARS_PER_TOKEN = 4
_SENTENCE_END = re.compile(r"[.!?\u3002\uff01\uff1f][\"')\]]*\s")


def split_message(text: str) -> list[str]:
    """Return the units a message is stored as: itself when short, else ~300-token pieces.

    Pieces end at a sentence end near the target (80-120 %), else at the last space past
    70 % of it, else at the target; each piece after the first repeats ~30 tokens of the
    one before (snapped to a word start) so no thought is cut in half.
    """
    units = [text[start:end].strip() for start, end in unit_spans(text)]
    return [unit for unit in units if unit]


def unit_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each unit in ``text``; together they cover every character."""
    if est_tokens(text) <= SPLIT_ABOVE_TOKENS:
        return [(0, len(text))]
    target = TARGET_TOKENS * _CHARS_PER_TOKEN
    overlap = OVERLAP_TOKENS * _CHARS_PER_TOKEN
    spans: list[tuple[int, int]] = []
    start = 0
    while len(text) - start > target * 3 // 2:
        end = _cut_point(text, start, target)
        spans.append((start, end))
        start = _overlap_start(text, start, end, overlap)
    spans.append((start, len(text)))
    return spans


def _cut_point(text: str, start: int, target: int) -> int:
    low, high = start + target * 4 // 5, start + target * 6 // 5
    best = None
    for match in _SENTENCE_END.finditer(text, low, high):
        best = match.end()
        if best >= start + target:
            break
    if best is not None:
        return best
    space = text.rfind(" ", start + target * 7 // 10, start + target)
    return space + 1 if space != -1 else start + target


def _overlap_start(text: str, start: int, end: int, overlap: int) -> int:
    candidate = max(end - overlap, start + 1)
    space = text.find(" ", candidate, end)
    return space + 1 if space != -1 else end
