"""Reading a model's answer into entries the reflection contract accepts.

Models answer in the shapes people see in practice: a JSON array of ``{text, importance}``,
an object ``{"entries": [...]}``, either one alone, inside a fenced code block, or with prose
around it. The entries are then held to the contract: its entry counts, and the text and
importance bounds of ``limits.py``, the module the server's contract text is written from.
The error message names the field at fault (never quoting the text), since it is shown to the
model on its one retry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.errors import InvalidAnswer

_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\r?\n(.*?)```", re.DOTALL)
_MAX_DECODE_ATTEMPTS = 64


@dataclass(frozen=True)
class EntryRules:
    """What one answer must hold: the checkout's entry counts, the bounds of ``limits``."""

    min_entries: int = limits.ENTRIES_MIN
    max_entries: int = limits.ENTRIES_MAX
    # contract 2: the labels an entry may replace, and the batch's lines it may cite
    labels: tuple[str, ...] = ()
    lines: int = 0

    @classmethod
    def of(cls, contract: schemas.ReflectionContract, lines: int = 0) -> EntryRules:
        return cls(contract.min_entries, contract.max_entries, tuple(contract.labels or ()), lines)


def parse_answer(answer: str, rules: EntryRules) -> list[schemas.EntryIn]:
    """The entries of ``answer``, trimmed; :class:`InvalidAnswer` says what is wrong."""
    return _checked(_entries_payload(answer), rules)


def _entries_payload(answer: str) -> list[Any]:
    """The first array of objects found, else the first array, else why there is none."""
    fallback: list[Any] | None = None
    problem = "the answer holds no JSON array of entries"
    for value in _json_values(answer):
        if isinstance(value, dict):
            if not isinstance(value.get("entries"), list):
                problem = 'a JSON object answer must hold an "entries" array'
                continue
            value = value["entries"]
        if isinstance(value, list):
            if value and all(isinstance(item, dict) for item in value):
                return value
            fallback = value if fallback is None else fallback
    if fallback is not None:
        return fallback
    raise InvalidAnswer(problem)


def _json_values(answer: str) -> Iterator[Any]:
    """Every JSON value the answer may mean, most likely first: the whole answer, each
    fenced block, then the first values that start at a ``[`` or ``{`` inside prose."""
    for candidate in (answer, *_FENCE.findall(answer)):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        yield value
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"[\[{]", answer)][:_MAX_DECODE_ATTEMPTS]
    for start in starts:
        try:
            value = decoder.raw_decode(answer, start)[0]
        except ValueError:
            continue
        yield value


def _checked(items: list[Any], rules: EntryRules) -> list[schemas.EntryIn]:
    if not rules.min_entries <= len(items) <= rules.max_entries:
        raise InvalidAnswer(
            f"the answer must hold {rules.min_entries} to {rules.max_entries} entries, "
            f"it holds {len(items)}"
        )
    return [_entry(index, item, rules) for index, item in enumerate(items)]


def _entry(index: int, item: Any, rules: EntryRules) -> schemas.EntryIn:
    where = f"entries[{index}]"
    if not isinstance(item, dict):
        raise InvalidAnswer(f'{where} must be an object {{"text": ..., "importance": ...}}')
    text, importance = item.get("text"), item.get("importance")
    if not isinstance(text, str):
        raise InvalidAnswer(f"{where}.text must be a string")
    text = text.strip()
    low, high = limits.ENTRY_CHARS_MIN, limits.ENTRY_CHARS_MAX
    if not low <= len(text) <= high:
        raise InvalidAnswer(f"{where}.text must be {low} to {high} characters")
    if limits.holds_an_id(text):
        raise InvalidAnswer(f"{where}.text must not contain identifiers: write plain prose")
    low, high = limits.IMPORTANCE_MIN, limits.IMPORTANCE_MAX
    # bool is an int subclass; 7.0 and "7" are not integers either.
    if type(importance) is not int or not low <= importance <= high:
        raise InvalidAnswer(f"{where}.importance must be an integer from {low} to {high}")
    try:
        return schemas.EntryIn(text=text, importance=importance, **_second(where, item, rules))
    except ValueError:  # a lone surrogate: JSON can escape one, UTF-8 cannot carry it
        raise InvalidAnswer(f"{where}.text must be valid Unicode text") from None


def _a_line(label: str, lines: int) -> bool:
    """Whether ``label`` names a line of the batch (``L3``)."""
    return label[:1] == "L" and label[1:].isdigit() and 1 <= int(label[1:]) <= lines


def _second(where: str, item: dict[str, Any], rules: EntryRules) -> dict[str, Any]:
    """What contract 2 adds to an entry. A label the checkout did not show is refused (the
    model is told the labels on its retry); cites that name no line of the batch, and a kind
    this server does not know, are left out: they only add to an entry."""
    fields: dict[str, Any] = {}
    replaces = item.get("replaces") or []
    if not isinstance(replaces, list) or not all(isinstance(r, str) for r in replaces):
        raise InvalidAnswer(f'{where}.replaces must be a list of labels such as ["R1"]')
    unknown = [r for r in replaces if r not in rules.labels and not _a_line(r, rules.lines)]
    if unknown:
        shown = ", ".join(rules.labels) or "none"
        raise InvalidAnswer(
            f"{where}.replaces names {unknown[0]}, which was not shown (shown: {shown}; "
            f"lines L1 to L{rules.lines})"
        )
    if replaces:
        fields["replaces"] = list(dict.fromkeys(replaces))[: limits.REPLACES_MAX]
    cites = item.get("cites") or []
    if isinstance(cites, list):
        lines = [c for c in cites if type(c) is int and 1 <= c <= rules.lines]
        if lines:
            fields["cites"] = list(dict.fromkeys(lines))[: limits.CITES_MAX]
    if item.get("kind") in limits.KINDS:
        fields["kind"] = item["kind"]
    return fields
