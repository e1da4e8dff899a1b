"""Facts that stay current, in SQL once for both stores: the reflections a version-2
checkout showed (by label), their replacement at commit, and what a reader needs to rank the
current fact first (docs/consolidation.md#contract-2-facts-that-stay-current). Each runs
inside the caller's transaction or read snapshot.

A replaced reflection is never deleted: it is marked ``superseded`` with the time it stopped
being current and the reflection that replaced it, and keeps its lineage.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memoryrouter.db import Tx
from mcp_memoryrouter.errors import InvalidRequest, NotFound
from mcp_memoryrouter.limits import RELATED_MAX, SUPERSEDED_CHAIN_MAX
from mcp_memoryrouter.vault.rules.domain import (
    Created,
    Entry,
    Kind,
    Memory,
    Superseded,
    Writer,
)
from mcp_memoryrouter.vault.store.sql import (
    MEMORY_COLUMNS,
    WRITER_COLUMNS,
    memory_from_row,
    writer_from_row,
)

PREFERENCES_READ = 200  # current preferences read at most for one prepare or search

# what a reader shows of a memory beside its text: its writer, superseded and kind
Described = tuple[Writer | None, Superseded | None, Kind | None]


def relate(tx: Tx, vault_id: str, batch_id: str, shown: Sequence[tuple[str, str]]) -> None:
    """Record a version-2 checkout: its contract, and the (label, reflection id) it showed."""
    tx.run("UPDATE batches SET contract = 2 WHERE id = ? AND vault_id = ?", (batch_id, vault_id))
    tx.many(
        "INSERT INTO batch_related (batch_id, vault_id, label, memory_id) VALUES (?, ?, ?, ?)",
        [(batch_id, vault_id, label, memory_id) for label, memory_id in shown],
    )


def supersede(
    tx: Tx,
    vault_id: str,
    batch_id: str,
    entries: Sequence[Entry],
    created: Sequence[Created],
    covers_to: int,
) -> int:
    """Resolve each entry's ``replaces``: a label to the reflection its checkout showed, a
    line (``L3``) to that memory of the batch; mark each replaced (the first entry naming one
    replaces it) as no longer current since the newest line the entry cites, or without
    cites the batch's last moment (``covers_to``): when the fact changed, not when the commit
    ran, so a year consolidated at once keeps its dates. A label the checkout did not show,
    or a line outside the batch, is refused. The number of memories marked."""
    named = [(i, label) for i, e in enumerate(entries) for label in e.replaces]
    if not named:
        return 0
    row = tx.one("SELECT contract FROM batches WHERE id = ? AND vault_id = ?", (batch_id, vault_id))
    if row is None or row[0] != 2:
        index = named[0][0]
        raise InvalidRequest(
            "replaces names a reflection a version-2 checkout showed, and this batch was "
            'checked out with contract 1: check out with "contract": 2, or leave replaces out',
            {"field": f"entries[{index}].replaces"},
        )
    shown = _shown(tx, vault_id, batch_id)
    for index, label in named:
        if label not in shown:
            labels = sorted((s for s in shown if s[0] == "R"), key=lambda s: int(s[1:]))
            lines = sum(s[0] == "L" for s in shown)
            raise InvalidRequest(
                f"replaces names {label}, which this checkout did not show (it showed: "
                f"{', '.join(labels) or 'no reflection'}; lines L1 to L{lines}): name only "
                "the labels of the contract's related reflections, or lines of the batch",
                {"field": f"entries[{index}].replaces"},
            )
    dates = _line_dates(tx, vault_id, batch_id)
    marked = 0
    for index, label in named:
        cited = [dates[line] for line in entries[index].cites if line in dates]
        marked += tx.run(
            "UPDATE memories SET superseded_ms = ?, superseded_by = ? "
            "WHERE vault_id = ? AND id = ? AND superseded_ms IS NULL",
            (max(cited, default=covers_to), created[index].id, vault_id, shown[label]),
        )
    return marked


def _line_dates(tx: Tx, vault_id: str, batch_id: str) -> dict[int, int]:
    """Each line of the batch, to when its memory happened."""
    rows = tx.all(
        "SELECT s.line, m.date_to FROM batch_sources s JOIN memories m ON m.id = s.memory_id "
        "WHERE s.batch_id = ? AND m.vault_id = ? AND s.line IS NOT NULL",
        (batch_id, vault_id),
    )
    return {int(line): int(date_to) for line, date_to in rows}


def _shown(tx: Tx, vault_id: str, batch_id: str) -> dict[str, str]:
    """What ``replaces`` may name in this batch: its labels, and its lines as ``L<n>``."""
    shown: dict[str, str] = dict(
        tx.all(
            "SELECT label, memory_id FROM batch_related WHERE batch_id = ? AND vault_id = ?",
            (batch_id, vault_id),
        )
    )
    lines = tx.all(
        "SELECT s.line, s.memory_id FROM batch_sources s JOIN batches b ON b.id = s.batch_id "
        "WHERE s.batch_id = ? AND b.vault_id = ? AND s.line IS NOT NULL",
        (batch_id, vault_id),
    )
    shown.update((f"L{line}", memory_id) for line, memory_id in lines)
    return shown


def restore(
    tx: Tx,
    vault_id: str,
    tier: int,
    created: Sequence[Created],
    replaced: Sequence[tuple[str, int, int]],
) -> None:
    """An import: mark each (id, when, entry index) superseded by the reflection that entry
    created; an id that is no current reflection of the vault at ``tier`` is refused (the
    caller's transaction writes nothing then)."""
    for i, (memory_id, at_ms, index) in enumerate(replaced):
        marked = tx.run(
            "UPDATE memories SET superseded_ms = ?, superseded_by = ? WHERE vault_id = ? "
            "AND id = ? AND tier = ? AND superseded_ms IS NULL",
            (at_ms, created[index].id, vault_id, memory_id, tier),
        )
        if not marked:  # an unknown id, as an unknown source id is
            raise NotFound(
                f"replaced[{i}].id names no current tier {tier} reflection of this vault: "
                "name a reflection imported before, of the tier of this request",
                {"field": f"replaced[{i}].id"},
            )


def described(tx: Tx, vault_id: str, ids: Sequence[str]) -> dict[str, Described]:
    """What stored each of the vault's memories among ``ids``, whether a later reflection
    replaced it, and its kind, in one read (a memory not there is left out)."""
    if not ids:
        return {}
    test, params = tx.among(sorted(set(ids)))
    rows = tx.all(
        f"SELECT id, superseded_ms, superseded_by, kind, {WRITER_COLUMNS} FROM memories "
        f"WHERE {tx.by_key('vault_id')} = ? AND id {test}",
        [vault_id, *params],
    )
    return {
        r[0]: (
            writer_from_row(r[4:]),
            None if r[1] is None else Superseded(int(r[1]), r[2]),
            r[3],
        )
        for r in rows
    }


def replaced_count(tx: Tx, vault_id: str) -> int:
    """How many of the vault's memories a later reflection replaced (a partial index)."""
    row = tx.one(
        "SELECT count(*) FROM memories WHERE vault_id = ? AND superseded_ms IS NOT NULL",
        (vault_id,),
    )
    return 0 if row is None else int(row[0])


def outdated(tx: Tx, vault_id: str, ids: Sequence[str]) -> dict[str, str]:
    """The moments among ``ids`` that a replaced reflection stood on: each one's first
    evidence, or one its entry cited (``evidence``), mapped to that reflection."""
    if not ids:
        return {}
    test, params = tx.among(sorted(set(ids)))
    rows = tx.all(
        "SELECT e.memory_id, e.reflection_id FROM evidence e JOIN memories m "
        "ON m.id = e.reflection_id AND m.vault_id = e.vault_id WHERE e.vault_id = ? "
        f"AND e.memory_id {test} AND (e.rank = 1 OR e.cited = 1) "
        "AND m.superseded_ms IS NOT NULL ORDER BY e.memory_id, m.superseded_ms DESC",
        [vault_id, *params],
    )
    found: dict[str, str] = {}
    for memory_id, reflection_id in rows:
        found.setdefault(memory_id, reflection_id)
    return found


def superseded_ids(tx: Tx, vault_id: str) -> frozenset[str]:
    """Every reflection of the vault that was replaced."""
    rows = tx.all(
        "SELECT id FROM memories WHERE vault_id = ? AND superseded_ms IS NOT NULL", (vault_id,)
    )
    return frozenset(r[0] for r in rows)


def successors(tx: Tx, vault_id: str, ids: Sequence[str]) -> dict[str, Memory]:
    """For each replaced reflection among ``ids``, the current one its replacements lead to
    (followed at most ``SUPERSEDED_CHAIN_MAX`` steps; a chain that ends at a deleted
    reflection leads nowhere)."""
    heads = {i: i for i in ids}
    found: dict[str, str] = {}
    for _ in range(SUPERSEDED_CHAIN_MAX):
        if not heads:
            break
        test, params = tx.among(sorted(set(heads.values())))
        rows: dict[str, str | None] = dict(
            tx.all(
                f"SELECT id, superseded_by FROM memories "
                f"WHERE {tx.by_key('vault_id')} = ? AND id {test}",
                [vault_id, *params],
            )
        )
        moved: dict[str, str] = {}
        for start, head in heads.items():
            if head not in rows:
                continue  # deleted: leads nowhere
            after = rows[head]
            if after is not None:
                moved[start] = after
            elif head != start:
                found[start] = head
        heads = moved
    if not found:
        return {}
    test, params = tx.among(sorted(set(found.values())))
    memories = {
        m.id: m
        for m in map(
            memory_from_row,
            tx.all(
                f"SELECT {MEMORY_COLUMNS} FROM memories m "
                f"WHERE {tx.by_key('m.vault_id')} = ? AND m.id {test}",
                [vault_id, *params],
            ),
        )
    }
    return {start: memories[head] for start, head in found.items() if head in memories}


def replaced(tx: Tx, vault_id: str, memory_id: str) -> list[Memory]:
    """The reflections ``memory_id`` replaced (each marked superseded by it), newest first:
    one entry names at most ``RELATED_MAX`` of them."""
    rows = tx.all(
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.vault_id = ? "
        "AND m.superseded_ms IS NOT NULL AND m.superseded_by = ? "
        "ORDER BY m.date_to DESC, m.id LIMIT ?",
        (vault_id, memory_id, RELATED_MAX),
    )
    return [memory_from_row(r) for r in rows]


def preferences(tx: Tx, vault_id: str, kinds: Sequence[str]) -> list[Memory]:
    """The vault's current memories of these kinds, most important and newest first."""
    test, params = tx.among(sorted(set(kinds)))
    rows = tx.all(
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.vault_id = ? AND m.kind {test} "
        "AND m.superseded_ms IS NULL ORDER BY m.importance DESC, m.date_to DESC, m.id LIMIT ?",
        [vault_id, *params, PREFERENCES_READ],
    )
    return [memory_from_row(r) for r in rows]
