"""Reflection debt: the block every write and retrieval response carries.

Raw memories have no ratings, so their debt is an importance equivalent of their tokens:
150 importance is about 50,000 raw tokens. Computed from counters only (O(1)).
"""

from __future__ import annotations

from typing import Any

from mcp_memoryrouter.limits import (
    DEBT_THRESHOLD_IMPORTANCE,
    DEBT_THRESHOLD_TOKENS,
    RAW_SUGGESTED,
    TIER2_SUGGESTED,
)
from mcp_memoryrouter.vault.rules.domain import Counters


def importance_equiv(raw_tokens: int) -> int:
    """``est_tokens * 150 / 50000``, rounded down to whole importance."""
    return raw_tokens * DEBT_THRESHOLD_IMPORTANCE // DEBT_THRESHOLD_TOKENS


# The fewest unconsolidated raw tokens whose importance equivalent reaches the threshold:
# ``importance_equiv`` rounds down, so exactly the threshold's tokens.
RAW_DUE_TOKENS = DEBT_THRESHOLD_TOKENS


def due(counters: Counters) -> bool:
    """Whether either tier reached the threshold (the suggestion is non-null); the store counts
    such vaults in SQL with the same two bounds (``store.memories.backlog``)."""
    return (
        counters.raw_tokens >= RAW_DUE_TOKENS or counters.t2_importance >= DEBT_THRESHOLD_IMPORTANCE
    )


def suggestion(counters: Counters) -> str | None:
    """Non-null once either tier boundary reaches 150 unconsolidated importance."""
    parts = []
    raw = importance_equiv(counters.raw_tokens)
    if raw >= DEBT_THRESHOLD_IMPORTANCE:
        parts.append(f"{RAW_SUGGESTED}: {raw} unconsolidated importance")
    if counters.t2_importance >= DEBT_THRESHOLD_IMPORTANCE:
        parts.append(f"{TIER2_SUGGESTED}: {counters.t2_importance} unconsolidated importance")
    return "; ".join(parts) or None


def debt_block(counters: Counters) -> dict[str, Any]:
    return {
        "unconsolidated": {
            "raw": {
                "units": counters.raw_units,
                "est_tokens": counters.raw_tokens,
                "importance_equiv": importance_equiv(counters.raw_tokens),
            },
            "tier2": {
                "count": counters.t2_count,
                "importance": counters.t2_importance,
                "est_tokens": counters.t2_tokens,
            },
        },
        "threshold_tokens": DEBT_THRESHOLD_TOKENS,
        "threshold_importance": DEBT_THRESHOLD_IMPORTANCE,
        "suggestion": suggestion(counters),
    }
