"""Coverage windows: a reflection covers the whole period of its batch's sources."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mcp_memoryrouter.vault.rules.domain import Candidate, Memory


def coverage(sources: Sequence[Candidate]) -> tuple[int, int]:
    """``[min, max]`` of the sources' windows (a raw memory's window is its date)."""
    return min(s.date_from for s in sources), max(s.date_to for s in sources)


def by_similarity(
    scored: Iterable[tuple[Memory, float | None]],
) -> list[tuple[Memory, float | None]]:
    """Sources most similar first; those without a vector after, each group by date then id
    (the order PostgreSQL's ``ORDER BY score DESC NULLS LAST, date_from, id`` gives)."""
    return sorted(scored, key=lambda s: (s[1] is None, -(s[1] or 0.0), s[0].date_from, s[0].id))
