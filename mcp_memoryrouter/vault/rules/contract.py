"""The reflection contract: the server-authored instructions every client's model reads.

``CONTRACT_VERSION`` bumps only when the wording or the meaning of an entry changes, so
integrations can pin behaviour against it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.vault.rules.domain import Entry, SourceTier

CONTRACT_VERSION = 1
MIN_ENTRIES = 1
MAX_ENTRIES = 100
MAX_ENTRY_CHARS = 8000

_COMMON_RULES = """
Rules for every entry:
- Write clean, standalone prose that makes sense without the source texts beside it. Name
  people, projects and things explicitly instead of "he", "it" or "the project".
- Put absolute dates in the text when time matters ("In early February 2026, ..."); use the
  dates given with each memory, never "yesterday" or "recently".
- Keep only what the sources support. Do not invent motives, outcomes or details; when the
  sources disagree, say so.
- Never put identifiers, scores, importance numbers, batch references or markup inside the
  text. Importance goes in its own field.
- Rate importance as an integer from 1 to 10: 1-3 routine or passing detail, 4-6 useful
  context worth recalling, 7-8 a decision, commitment, preference or turning point, 9-10
  something that shapes identity, principles or long-term direction.
- Write between 5 and 10 entries for a typical batch (at least 1, at most 100); fewer for a
  thin batch, never padding.
- Answer with a JSON array of objects {"text": "...", "importance": N} and nothing else."""

_INSTRUCTIONS: dict[int, str] = {
    2: (
        "You are consolidating raw memories into tier 2 reflections: the WHAT. The memories "
        "below are verbatim moments (messages, observations) in chronological order, each "
        "with its date. Write reflections that record what happened: events, decisions and "
        "their reasons, facts learned about people and their preferences, plans, problems "
        "and how they were resolved. Merge moments that belong to one event into one entry; "
        "keep separate events separate. Prefer concrete specifics (names, numbers, choices "
        "made) over vague summaries, so a later search for a detail finds the right entry."
        + _COMMON_RULES
    ),
    3: (
        "You are consolidating tier 2 reflections into tier 3 high-level reflections: the "
        "WHY. The reflections below each summarize what happened over a period, in "
        "chronological order with their dates. Write entries that distill what it all "
        "means: lasting patterns, priorities and principles, how the person or project "
        "works and what they care about, long-running threads and how they changed over "
        "time. Each entry should hold across several of the reflections; do not restate a "
        "single event unless it changed the direction of everything after it." + _COMMON_RULES
    ),
}

_LEGACY_DEFINITIONS: dict[int, str] = {
    2: (
        "Tier 2 (main memories) capture the WHAT: consolidated reflections of specific "
        "meaningful events, decisions and facts, written as standalone prose with an "
        "importance from 1 to 10."
    ),
    3: (
        "Tier 3 (high-level memories) capture the WHY: identity, principles, priorities and "
        "long-running patterns distilled from many tier 2 reflections, with an importance "
        "from 1 to 10."
    ),
}


def reflection_contract(source_tier: SourceTier) -> dict[str, Any]:
    target = source_tier + 1
    return {
        "version": CONTRACT_VERSION,
        "target_tier": target,
        "instructions": _INSTRUCTIONS[target],
        "entry_schema": {
            "text": "string, 1 to 8000 chars, clean standalone prose, no IDs or scores inline",
            "importance": "integer 1 to 10",
        },
        "min_entries": MIN_ENTRIES,
        "max_entries": MAX_ENTRIES,
        "recommended_entries": "5-10",
    }


def tier_definitions(source_tier: SourceTier) -> dict[str, Any]:
    """The legacy pre-contract field, emitted unchanged for older clients."""
    target = source_tier + 1
    return {"target_tier": target, "instruction": _LEGACY_DEFINITIONS[target]}


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_BATCH = re.compile(r"\bcb_[0-9A-Za-z]{8,}")


def check_entries(entries: Sequence[Entry], batch_id: str) -> list[Entry]:
    """Validate committed entries; return them with their text trimmed.

    Ids never travel through the model, so any text holding a memory id (UUID-shaped) or
    a batch id is refused rather than stored.
    """
    if not MIN_ENTRIES <= len(entries) <= MAX_ENTRIES:
        raise InvalidRequest(
            f"entries must hold {MIN_ENTRIES} to {MAX_ENTRIES} items, got {len(entries)}",
            {"field": "entries"},
        )
    checked = []
    for index, entry in enumerate(entries):
        text = entry.text.strip()
        where = {"field": f"entries[{index}].text"}
        if not 1 <= len(text) <= MAX_ENTRY_CHARS:
            raise InvalidRequest(
                f"entry text must be 1 to {MAX_ENTRY_CHARS} characters after trimming", where
            )
        if _UUID.search(text) or _BATCH.search(text) or batch_id in text:
            raise InvalidRequest(
                "entry text must not contain memory ids or batch ids: write plain prose", where
            )
        if not 1 <= entry.importance <= 10:
            raise InvalidRequest(
                "importance must be an integer from 1 to 10",
                {"field": f"entries[{index}].importance"},
            )
        checked.append(Entry(text, entry.importance))
    return checked
