"""Near-duplicates on write: the rule, once (docs/api.md, "Near-duplicates on write").

A memory already in the vault is *similar* to a new text when the cosine of their vectors (each
embedded as the vault embeds a memory: its date, then its text) is at least
``limits.NEAR_DUPLICATE_COSINE``. An ingest lists what it found (``similar``); with
``dedupe: "near"`` it does not store a text that *repeats* one of them: similar, and saying no
detail the stored memory does not (a number, a name: a word with a digit or a capital letter
past the sentence's first word). The detail check is there because the embedding barely tells
an update from a repeat: "moved to Lisbon" and "moved to Porto" score like a paraphrase (half
of the one-detail changes measured in docs/benchmarks.md reach 0.885), and an update must be
stored. Without embeddings only the same text (whitespace and case aside) is similar, at 1.0.
"""

from __future__ import annotations

import re
from typing import Literal

from mcp_memoryrouter import limits

# "exact": a message repeated with its date, role and session is stored once (always);
# "near": nor is one that repeats a memory already in the vault (:func:`repeats`)
Dedupe = Literal["exact", "near"]

_WORD = re.compile(r"[^\W_]+(?:['\u2019.:,/-][^\W_]+)*")
_SENTENCE_END = re.compile(r"[.!?]\s")


def similar(score: float) -> bool:
    """Whether a cosine makes a stored memory similar to a new text."""
    return score >= limits.NEAR_DUPLICATE_COSINE


def details(text: str) -> frozenset[str]:
    """The words of ``text`` that carry a detail: any with a digit, and any capitalized one
    that does not open a sentence (lower-cased to compare)."""
    found: set[str] = set()
    opening = True
    for match in _WORD.finditer(text):
        word = match.group()
        if any(c.isdigit() for c in word) or (word[0].isupper() and not opening):
            found.add(word.lower())
        opening = False
        tail = text[match.end() : match.end() + 2]
        if _SENTENCE_END.match(tail) or tail.startswith(":"):
            opening = True
    return frozenset(found)


def new_details(new: str, stored: str) -> frozenset[str]:
    """The details of ``new`` that ``stored`` does not say (case aside)."""
    said = {word.lower() for word in _WORD.findall(stored)}
    return frozenset(d for d in details(new) if d not in said)


def repeats(new: str, stored: str, score: float) -> bool:
    """Whether ``new`` repeats ``stored`` (``score``: their cosine): similar, and no detail
    of ``new`` missing from ``stored``."""
    return similar(score) and not new_details(new, stored)


def same_text(new: str, stored: str) -> bool:
    """The match without embeddings: the same words, whitespace and case aside."""
    return " ".join(new.split()).casefold() == " ".join(stored.split()).casefold()
