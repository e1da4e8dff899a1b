"""Whose memories prepare injects: the rule, once (docs/proxy.md, "Whose memories are
injected").

Every memory records the key that stored it (its public id) and the mode that key was
presented in (``full``, or ``write`` for ``mk_…:write``). A write-only key stores but may not
read; what it stores can still reach a model through prepare, into the place a model keeps
its instructions. So by default (``trusted``) prepare injects only what a current key of the
vault stored in full mode: a key narrowed to ``:write``, or one revoked since, stored nothing
prepare injects. Memories stored before writers were kept have none and count as trusted
(the behaviour they were stored under). ``any`` injects every memory, as search returns them.

A reflection is stored by the key that committed (or imported) it, always in full mode (a
``:write`` key cannot check out): whatever its sources, it is that key's. A write-only key's
raw memories reach a reflection only through a full key's checkout and its model's reading.

The search indexes apply the same rule as a filter (``SearchFilter.writers``:
``search/rowtable.py`` on SQLite, ``store/postgres/search.py`` on PostgreSQL).
"""

from __future__ import annotations

from typing import Literal

from mcp_memoryrouter.vault.rules.domain import Writer

Writers = Literal["trusted", "any"]
WRITERS: tuple[Writers, ...] = ("trusted", "any")


def injectable(writer: Writer | None, current: frozenset[str]) -> bool:
    """Whether a memory stored by ``writer`` (None: before writers were kept) is injected
    by default, ``current`` being the public ids of the vault's keys now."""
    return writer is None or (writer.mode == "full" and writer.key_id in current)
