"""The reflection contract: the server-authored instructions every client's model reads.

``CONTRACT_VERSION`` bumps only when the wording or the meaning of an entry changes, so
integrations can pin behaviour against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from mcp_memoryrouter.errors import InvalidRequest
from mcp_memoryrouter.limits import (
    ENTRIES_MAX,
    ENTRIES_MIN,
    ENTRIES_RECOMMENDED,
    ENTRY_CHARS_MAX,
    ENTRY_CHARS_MIN,
    IMPORTANCE_MAX,
    IMPORTANCE_MIN,
    holds_an_id,
)
from mcp_memoryrouter.vault.rules.domain import Entry, SourceTier

CONTRACT_VERSION = 1

_COMMON_RULES = (
    """
Rules for every entry:
- Write clean, standalone prose that makes sense without the source texts beside it. Name
  people, projects and things explicitly instead of "he", "it" or "the project".
- Put absolute dates in the text when time matters ("In early February 2026, ..."); use the
  dates given with each memory, never "yesterday" or "recently".
- Keep only what the sources support. Do not invent motives, outcomes or details; when the
  sources disagree, say so.
- Never put identifiers, scores, importance numbers, batch references or markup inside the
  text. Importance goes in its own field.
"""
    f"- Rate importance as an integer from {IMPORTANCE_MIN} to {IMPORTANCE_MAX}: 1-3 routine "
    "or passing detail, 4-6 useful\n"
    """  context worth recalling, 7-8 a decision, commitment, preference or turning point, 9-10
  something that shapes identity, principles or long-term direction.
"""
    f"- Write between 5 and 10 entries for a typical batch (at least {ENTRIES_MIN}, at most "
    f"{ENTRIES_MAX}); fewer for a\n"
    """  thin batch, never padding.
- Answer with a JSON array of objects {"text": "...", "importance": N} and nothing else."""
)

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
            "text": f"string, {ENTRY_CHARS_MIN} to {ENTRY_CHARS_MAX} chars, clean standalone "
            "prose, no IDs or scores inline",
            "importance": f"integer {IMPORTANCE_MIN} to {IMPORTANCE_MAX}",
        },
        "min_entries": ENTRIES_MIN,
        "max_entries": ENTRIES_MAX,
        "recommended_entries": ENTRIES_RECOMMENDED,
    }


def tier_definitions(source_tier: SourceTier) -> dict[str, Any]:
    """The legacy pre-contract field, emitted unchanged for older clients."""
    target = source_tier + 1
    return {"target_tier": target, "instruction": _LEGACY_DEFINITIONS[target]}


def check_entries(entries: Sequence[Entry]) -> list[Entry]:
    """Validate committed entries; return them with their text trimmed.

    Ids never travel through the model, so any text holding a memory id (UUID-shaped) or
    a batch id (``cb_`` and 8 or more letters or digits: every batch id the vault makes) is
    refused rather than stored. Both are patterns, so ``/openapi.json`` says them too.
    """
    if not ENTRIES_MIN <= len(entries) <= ENTRIES_MAX:
        raise InvalidRequest(
            f"entries must hold {ENTRIES_MIN} to {ENTRIES_MAX} items, got {len(entries)}",
            {"field": "entries"},
        )
    checked = []
    for index, entry in enumerate(entries):
        text = entry.text.strip()
        where = {"field": f"entries[{index}].text"}
        if not ENTRY_CHARS_MIN <= len(text) <= ENTRY_CHARS_MAX:
            raise InvalidRequest(
                f"entry text must be {ENTRY_CHARS_MIN} to {ENTRY_CHARS_MAX} characters after "
                "trimming",
                where,
            )
        if holds_an_id(text):
            raise InvalidRequest(
                "entry text must not contain memory ids or batch ids: write plain prose", where
            )
        if not IMPORTANCE_MIN <= entry.importance <= IMPORTANCE_MAX:
            raise InvalidRequest(
                f"importance must be an integer from {IMPORTANCE_MIN} to {IMPORTANCE_MAX}",
                {"field": f"entries[{index}].importance"},
            )
        checked.append(replace(entry, text=text))
    return checked
