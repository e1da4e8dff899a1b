"""The current fact first: how search, prepare and date search order a reflection a later one
replaced (docs/consolidation.md#contract-2-facts-that-stay-current).

A replaced (superseded) row never ranks above what replaced it: the current reflection its
replacements lead to takes the superseded row's place (and score) when the search had not
already ranked it higher, and the superseded row follows it, marked as superseded. With
``current_only`` the superseded row is left out and its successor stays in its place. A moment
a replaced reflection stood on (its first evidence, or a line it cited) is kept, since it is
what was said then, but it too follows the current reflection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mcp_memoryrouter.vault.rules.domain import Memory, ScoredMemory


def current_first(
    hits: Sequence[ScoredMemory],
    successors: Mapping[str, Memory],
    *,
    current_only: bool = False,
) -> list[ScoredMemory]:
    """``hits`` with the current successor of each outdated one (``successors``: the id of a
    superseded row, or of a moment a superseded reflection stood on, to the current memory)
    placed before it, each memory once."""
    ranked: list[ScoredMemory] = []
    seen: set[str] = set()
    for hit in hits:
        memory = hit.memory
        successor = successors.get(memory.id)
        if successor is not None and successor.id not in seen:
            ranked.append(ScoredMemory(successor, hit.score))
            seen.add(successor.id)
        if memory.superseded is not None and current_only:
            continue
        if memory.id not in seen:
            ranked.append(hit)
            seen.add(memory.id)
    return ranked


def preference_budget(tokens: int, preferences_max: int) -> int:
    """The tokens prepare spends on standing preferences: ``preferences_max``, and never more
    than a quarter of the block's own budget."""
    return min(preferences_max, tokens // 4)


def related_queries(texts: Sequence[str], queries: int, chars: int) -> list[str]:
    """The searches a version-2 checkout runs for what the vault already holds: the batch's
    texts in order, cut into at most ``queries`` consecutive runs of about equal length,
    each at most ``chars`` long (a long batch is sampled, not read whole)."""
    texts = [t.strip() for t in texts if t.strip()]
    if not texts:
        return []
    total = sum(len(t) + 1 for t in texts)
    count = max(1, min(queries, -(-total // chars)))
    size = -(-len(texts) // count)
    runs = [texts[i : i + size] for i in range(0, len(texts), size)]
    return [" ".join(run)[:chars] for run in runs]


def gist(text: str, chars: int) -> str:
    """``text`` cut to at most ``chars`` characters at a word, marked with "..." when cut."""
    text = " ".join(text.split())
    if len(text) <= chars:
        return text
    cut = text[: chars - 3].rsplit(" ", 1)[0] or text[: chars - 3]
    return cut + "..."


def spread_lines(texts: Sequence[str], count: int) -> list[str]:
    """At most ``count`` of ``texts``, evenly spread over them, in order."""
    if len(texts) <= count:
        return list(texts)
    return [texts[i * len(texts) // count] for i in range(count)]


def strongest(
    per_line: Sequence[Sequence[ScoredMemory]],
    leave_out: frozenset[str],
    floor: float | None,
    limit: int,
) -> list[Memory]:
    """The memories most distinctly like one of the lines (``per_line``: each line's vector
    hits, best first): a hit counts by how far its cosine stands above the median of its
    line's hits, so a line of small talk, about as like every reflection, weighs little, and
    a fact, much more like the one reflection it changes, weighs much. Hits under ``floor``,
    and those in ``leave_out``, do not count; best first, at most ``limit``."""
    best: dict[str, tuple[float, Memory]] = {}
    for hits in per_line:
        scores = sorted(hit.score or 0.0 for hit in hits)
        if not scores:
            continue
        middle = scores[len(scores) // 2]
        for hit in hits:
            score = hit.score or 0.0
            if hit.memory.id in leave_out or (floor is not None and score < floor):
                continue
            margin = score - middle
            if hit.memory.id not in best or margin > best[hit.memory.id][0]:
                best[hit.memory.id] = (margin, hit.memory)
    ranked = sorted(best.values(), key=lambda found: (-found[0], found[1].id))
    return [memory for _, memory in ranked[:limit]]


def merged(lists: Sequence[Sequence[Memory]], limit: int) -> list[Memory]:
    """Round robin over ranked lists, each memory once, at most ``limit``."""
    taken: list[Memory] = []
    seen: set[str] = set()
    for rank in range(max((len(found) for found in lists), default=0)):
        for found in lists:
            if rank < len(found) and found[rank].id not in seen and len(taken) < limit:
                taken.append(found[rank])
                seen.add(found[rank].id)
    return taken
