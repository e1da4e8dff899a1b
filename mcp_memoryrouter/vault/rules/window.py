"""Date-search paging without cursors.

A window is visited newest first by each row's coverage start, or oldest first by its
coverage end (for a raw memory both are its date), clamped into the window (a reflection
reaching past the window's edge sorts at that edge). A row matches a window when its coverage
overlaps it. A page holds whole groups of rows that share a key, as many as fit the token
budget (the first group always, so paging always advances). When a page is truncated, the
key of the first group left out becomes the open bound of the page:

- newest first: ``returned.from`` = that key; continue with ``to: returned.from``;
- oldest first: ``returned.to`` = that key; continue with ``from: returned.to``.

Every row returned so far has a key strictly beyond the new bound, and every row not yet
returned has a key within it, so following the continuation visits each row exactly once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from mcp_memoryrouter.vault.rules.domain import Memory

Order = Literal["newest_first", "oldest_first"]


def sort_key(memory: Memory, order: Order, window: tuple[int, int] | None = None) -> int:
    """A row's paging key, clamped into ``window``: a reflection that began before the window
    (newest first) or ends after it (oldest first) sorts at the window's edge, so the open
    bound of a page never falls outside the window it pages."""
    if order == "newest_first":
        return memory.date_from if window is None else max(memory.date_from, window[0])
    return memory.date_to if window is None else min(memory.date_to, window[1])


@dataclass(frozen=True)
class Page:
    rows: tuple[Memory, ...]
    boundary: int | None  # the key of the first group left out; None when nothing was left


def take_page(
    rows: Iterable[Memory], order: Order, budget: int, window: tuple[int, int] | None = None
) -> Page:
    """Take whole key groups from ``rows`` (already in page order, keys clamped into
    ``window``) within ``budget`` tokens."""
    taken: list[Memory] = []
    group: list[Memory] = []
    group_key: int | None = None
    tokens = 0
    for row in rows:
        key = sort_key(row, order, window)
        if key != group_key and group:
            group_tokens = sum(m.tokens for m in group)
            if taken and tokens + group_tokens > budget:
                return Page(tuple(taken), group_key)
            taken += group
            tokens += group_tokens
            group = []
            if tokens >= budget:
                return Page(tuple(taken), key)
        group_key = key
        group.append(row)
    if group:
        if taken and tokens + sum(m.tokens for m in group) > budget:
            return Page(tuple(taken), group_key)
        taken += group
    return Page(tuple(taken), None)
