"""How each write moves the per-vault counters (debt and totals). Pure: both stores apply
the same deltas inside the write's own transaction."""

from __future__ import annotations

from collections.abc import Iterable

Deltas = dict[str, int]  # a column of ``vaults`` -> how much it changes


def after_ingest(units: int, tokens: int) -> Deltas:
    """New raw memories join the tier-1 totals and the raw debt."""
    return {"n1": units, "tok1": tokens, "raw_units": units, "raw_tokens": tokens}


def after_delete(rows: Iterable[tuple[int, int, int | None, int]]) -> Deltas:
    """Deleted rows as (tier, tokens, importance, consolidated): off the totals, and off the
    debt while they were still unconsolidated."""
    deltas: Deltas = {}

    def add(column: str, value: int) -> None:
        deltas[column] = deltas.get(column, 0) - value

    for tier, tokens, importance, consolidated in rows:
        add(f"n{tier}", 1)
        add(f"tok{tier}", tokens)
        if tier > 1:
            add(f"imp{tier}", importance or 0)
        if not consolidated and tier == 1:
            add("raw_units", 1)
            add("raw_tokens", tokens)
        if not consolidated and tier == 2:
            add("t2_count", 1)
            add("t2_tokens", tokens)
            add("t2_importance", importance or 0)
    return deltas


def after_consolidation(
    source_tier: int,
    sources: Iterable[tuple[int, int | None]],
    created: Iterable[tuple[int, int]],
) -> Deltas:
    """Sources (tokens, importance) leave the debt of their tier; the new reflections
    (tokens, importance) join the totals of the tier above, and its debt when that is 2."""
    sources, created = list(sources), list(created)
    new_tokens = sum(t for t, _ in created)
    new_importance = sum(i for _, i in created)
    target = source_tier + 1
    deltas: Deltas = {
        f"n{target}": len(created),
        f"tok{target}": new_tokens,
        f"imp{target}": new_importance,
    }
    if source_tier == 1:
        deltas.update(
            raw_units=-len(sources),
            raw_tokens=-sum(t for t, _ in sources),
            t2_count=len(created),
            t2_tokens=new_tokens,
            t2_importance=new_importance,
        )
    else:
        deltas.update(
            t2_count=-len(sources),
            t2_tokens=-sum(t for t, _ in sources),
            t2_importance=-sum(i or 0 for _, i in sources),
        )
    return deltas


def update_statement(deltas: Deltas, mark: str) -> tuple[str, list[int]]:
    """``UPDATE vaults SET col = col + …`` with ``mark`` as the placeholder; the vault id is
    the last parameter."""
    columns = sorted(deltas)
    assignments = ", ".join(f"{c} = {c} + {mark}" for c in columns)
    return f"UPDATE vaults SET {assignments} WHERE id = {mark}", [deltas[c] for c in columns]


def after_return(rows: Iterable[tuple[int, int, int | None]]) -> Deltas:
    """Sources (tier, tokens, importance) back in the unconsolidated pool, since every
    reflection built from them was deleted with what it was learned from: they rejoin the
    debt of their tier, which the next consolidation pays again."""
    deltas: Deltas = {}

    def add(column: str, value: int) -> None:
        deltas[column] = deltas.get(column, 0) + value

    for tier, tokens, importance in rows:
        if tier == 1:
            add("raw_units", 1)
            add("raw_tokens", tokens)
        elif tier == 2:
            add("t2_count", 1)
            add("t2_tokens", tokens)
            add("t2_importance", importance or 0)
    return deltas


def merged(*parts: Deltas) -> Deltas:
    """One set of deltas from several (summed per column)."""
    total: Deltas = {}
    for part in parts:
        for column, value in part.items():
            total[column] = total.get(column, 0) + value
    return total
