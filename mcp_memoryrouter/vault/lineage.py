"""Coverage windows: a reflection covers the whole period of its batch's sources."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memoryrouter.vault.domain import Candidate


def coverage(sources: Sequence[Candidate]) -> tuple[int, int]:
    """``[min, max]`` of the sources' windows (a raw memory's window is its date)."""
    return min(s.date_from for s in sources), max(s.date_to for s in sources)
