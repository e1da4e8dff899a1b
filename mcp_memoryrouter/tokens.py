"""The one token estimate used for every budget, debt figure and meter, on both sides: the
vault's budgets and the MCP server's result budget count the same way."""

from __future__ import annotations


def est_tokens(text: str) -> int:
    """``ceil(chars / 4)``: deterministic, and the rule the production service uses."""
    return -(-len(text) // 4)
