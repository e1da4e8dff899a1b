"""Which rows a checkout takes. Pure: the store feeds candidates oldest first and stops
reading as soon as a rule says the batch is complete."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mcp_memoryrouter import limits
from mcp_memoryrouter.vault.rules.domain import Candidate, SourceTier


@dataclass(frozen=True)
class Selection:
    """How to fill one batch: a hard token budget, or tier 2's importance target."""

    token_budget: int | None
    importance_target: int | None
    soft_cap_tokens: int | None


def clamp_budget(max_tokens: int) -> int:
    return max(limits.CHECKOUT_TOKENS_MIN, min(limits.CHECKOUT_TOKENS_MAX, max_tokens))


def selection_for(tier: SourceTier, max_tokens: int | None) -> Selection:
    """An explicit ``max_tokens`` is a hard cap at either tier; without it tier 1 takes
    50,000 tokens and tier 2 takes 150 importance within a 10,000-token soft cap."""
    if max_tokens is not None:
        return Selection(clamp_budget(max_tokens), None, None)
    if tier == 1:
        return Selection(limits.CHECKOUT_TOKENS_DEFAULT, None, None)
    return Selection(None, limits.TIER2_IMPORTANCE_TARGET, limits.TIER2_SOFT_CAP_TOKENS)


def select(candidates: Iterable[Candidate], rule: Selection) -> list[Candidate]:
    """Take candidates in order until the rule is met.

    The first row is always taken, even when it alone exceeds the budget, so a loop
    always makes progress. Later rows are taken while the running total stays within
    the budget (or the soft cap); with an importance target, the row that reaches it
    completes the batch.
    """
    chosen: list[Candidate] = []
    tokens = importance = 0
    cap = rule.token_budget if rule.token_budget is not None else rule.soft_cap_tokens
    for row in candidates:
        if chosen and cap is not None and tokens + row.tokens > cap:
            break
        chosen.append(row)
        tokens += row.tokens
        importance += row.importance or 0
        if rule.importance_target is not None and importance >= rule.importance_target:
            break
    return chosen
