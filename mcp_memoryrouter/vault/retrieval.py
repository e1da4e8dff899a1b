"""Turning a query into lexical search terms."""

from __future__ import annotations

import re

MAX_TERMS = 32
_WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(query: str) -> list[str]:
    """Distinct lower-cased words of the query, in order, at most 32."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        seen.setdefault(word, None)
        if len(seen) == MAX_TERMS:
            break
    return list(seen)
