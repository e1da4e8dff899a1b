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
    RELATED_MAX,
    holds_an_id,
)
from mcp_memoryrouter.vault.rules.dates import day
from mcp_memoryrouter.vault.rules.domain import Entry, Related, SourceTier

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


def reflection_contract(
    source_tier: SourceTier, version: int = 1, related: Sequence[Related] = ()
) -> dict[str, Any]:
    """The contract a checkout hands the model: version 1 (the default, unchanged), or
    version 2 with the ``related`` reflections the vault already holds, by label."""
    target = source_tier + 1
    schema = {
        "text": f"string, {ENTRY_CHARS_MIN} to {ENTRY_CHARS_MAX} chars, clean standalone "
        "prose, no IDs or scores inline",
        "importance": f"integer {IMPORTANCE_MIN} to {IMPORTANCE_MAX}",
    }
    instructions = _INSTRUCTIONS[target]
    shown: dict[str, Any] = {}
    if version == 2:
        schema.update(_SCHEMA_2)
        instructions = _instructions_2(target, related)
        shown["labels"] = [r.label for r in related]
    return {
        "version": version,
        "target_tier": target,
        "instructions": instructions,
        "entry_schema": schema,
        "min_entries": ENTRIES_MIN,
        "max_entries": ENTRIES_MAX,
        "recommended_entries": ENTRIES_RECOMMENDED,
        **shown,
    }


def related_line(related: Related) -> str:
    """How the contract shows an existing reflection: ``[R1] 2026-02-01 to 2026-02-09: text``."""
    start, end = day(related.covers_from), day(related.covers_to)
    when = start if start == end else f"{start} to {end}"
    return f"[{related.label}] {when}: {related.text}"


def labels(count: int) -> list[str]:
    """The labels of ``count`` related reflections, in the order shown: R1, R2, ..."""
    return [f"R{n}" for n in range(1, min(count, RELATED_MAX) + 1)]


_SCHEMA_2 = {
    "replaces": "optional list of the labels (R1, R2, ...) of the reflections shown above "
    "that this entry changes, corrects or contradicts, and of earlier lines of this batch "
    "it changes (L3)",
    "cites": "optional list of the numbers of the memory lines this entry draws on",
    "kind": 'optional, "preference" for a lasting preference or standing instruction',
}


def _instructions_2(target: int, related: Sequence[Related]) -> str:
    """Version 2: version 1's instructions with its answer line replaced by what version 2
    adds (what the vault already holds, replaces, cites and kind) and its own answer line."""
    first = _INSTRUCTIONS[target]
    head = first[: first.rindex("- Answer with a JSON array")]
    if related:
        shown = "\n".join(map(related_line, related))
        holds = (
            "The vault already holds these reflections related to the memories below, "
            "each with a label and the days it covers:\n" + shown + "\n"
        )
    else:
        holds = "The vault holds no reflection related to the memories below yet.\n"
    return (
        head
        + """- Write what is true now. When an entry changes, corrects or contradicts one of the
  reflections shown with a label (a move, a changed plan, a new job, a preference that
  changed), write the current fact in full and put that reflection's label in the entry's
  "replaces" list. Do not restate a shown reflection that is still true. A label is not an
  identifier: never write one inside the text.
- When a later memory line below changes what an earlier line of the same batch said, write
  only what is true now and put the earlier line's number after an L in "replaces" ("L3").
- The memories below are numbered: put the numbers of the lines an entry draws on in its
  "cites" list.
- When an entry records a lasting preference or a standing instruction ("always answer in
  metric units", "I am vegetarian"), set "kind" to "preference"; a changed preference
  replaces the old one like any fact.
- Answer with a JSON array of objects {"text": "...", "importance": N, "replaces": ["R1"],
  "cites": [3, 7], "kind": "preference"} (replaces, cites and kind only where they apply)
  and nothing else.

"""
        + holds
    )


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
