"""Reading a model's answer into entries the reflection contract accepts.

Models answer in the shapes people see in practice: a JSON array of ``{text, importance}``,
an object ``{"entries": [...]}``, either one alone, inside a fenced code block, or with prose
around it. The entries are then held to the contract's ``entry_schema`` and entry counts;
the error message names the field at fault (never quoting the text), since it is shown to the
model on its one retry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mcp_memoryrouter import schemas
from mcp_memoryrouter.errors import InvalidAnswer

_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\r?\n(.*?)```", re.DOTALL)
_RANGE = re.compile(r"(\d+)\s*(?:to|-|\u2013)\s*(\d+)")
# Ids never travel through the model; the server refuses entries that hold one.
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_BATCH = re.compile(r"\bcb_[0-9A-Za-z]{8,}")
_MAX_DECODE_ATTEMPTS = 64


@dataclass(frozen=True)
class Entry:
    text: str
    importance: int


@dataclass(frozen=True)
class EntryRules:
    """What one answer must hold, read from the checkout's ``reflection_contract``."""

    min_entries: int = 1
    max_entries: int = 100
    min_chars: int = 1
    max_chars: int = 8000
    min_importance: int = 1
    max_importance: int = 10

    @classmethod
    def of(cls, contract: schemas.ReflectionContract) -> EntryRules:
        chars = _range_in(contract.entry_schema.get("text", ""), (cls.min_chars, cls.max_chars))
        importance = _range_in(
            contract.entry_schema.get("importance", ""), (cls.min_importance, cls.max_importance)
        )
        return cls(contract.min_entries, contract.max_entries, *chars, *importance)


def _range_in(description: str, default: tuple[int, int]) -> tuple[int, int]:
    """``"string, 1 to 8000 chars, ..."`` → ``(1, 8000)``; the default when none is given."""
    found = _RANGE.search(description)
    return (int(found.group(1)), int(found.group(2))) if found else default


def parse_answer(answer: str, rules: EntryRules) -> list[Entry]:
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


def _checked(items: list[Any], rules: EntryRules) -> list[Entry]:
    if not rules.min_entries <= len(items) <= rules.max_entries:
        raise InvalidAnswer(
            f"the answer must hold {rules.min_entries} to {rules.max_entries} entries, "
            f"it holds {len(items)}"
        )
    return [_entry(index, item, rules) for index, item in enumerate(items)]


def _entry(index: int, item: Any, rules: EntryRules) -> Entry:
    where = f"entries[{index}]"
    if not isinstance(item, dict):
        raise InvalidAnswer(f'{where} must be an object {{"text": ..., "importance": ...}}')
    text, importance = item.get("text"), item.get("importance")
    if not isinstance(text, str):
        raise InvalidAnswer(f"{where}.text must be a string")
    text = text.strip()
    if not rules.min_chars <= len(text) <= rules.max_chars:
        raise InvalidAnswer(
            f"{where}.text must be {rules.min_chars} to {rules.max_chars} characters"
        )
    if _UUID.search(text) or _BATCH.search(text):
        raise InvalidAnswer(f"{where}.text must not contain identifiers: write plain prose")
    # bool is an int subclass; 7.0 and "7" are not integers either.
    if type(importance) is not int or not (
        rules.min_importance <= importance <= rules.max_importance
    ):
        raise InvalidAnswer(
            f"{where}.importance must be an integer from {rules.min_importance} "
            f"to {rules.max_importance}"
        )
    return Entry(text, importance)
