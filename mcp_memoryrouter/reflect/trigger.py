"""Reading the server's debt decision: which tier its ``suggestion`` asks to consolidate.

The threshold logic is entirely server-side; the client never compares numbers. The
suggestion names raw consolidation ("raw consolidation suggested: N unconsolidated
importance"), tier 2 ("tier 2 consolidation suggested: ..."), or both joined by ``"; "``.
"""

from __future__ import annotations

import re
from typing import Literal

from mcp_memoryrouter.limits import RAW_SUGGESTED, TIER2_SUGGESTED

SourceTier = Literal[1, 2]

_NAMES: tuple[tuple[SourceTier, re.Pattern[str]], ...] = (
    (1, re.compile(rf"\b{re.escape(RAW_SUGGESTED)}\b", re.IGNORECASE)),
    (2, re.compile(rf"\b{re.escape(TIER2_SUGGESTED)}\b", re.IGNORECASE)),
)


def tiers_named(suggestion: str | None) -> tuple[SourceTier, ...]:
    """The tiers the suggestion names, tier 1 first: consolidating raw memories feeds tier 2,
    so raw debt is paid before tier 2 debt."""
    if not suggestion:
        return ()
    return tuple(tier for tier, name in _NAMES if name.search(suggestion))


def next_tier(suggestion: str | None) -> SourceTier | None:
    named = tiers_named(suggestion)
    return named[0] if named else None
