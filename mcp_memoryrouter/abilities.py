"""What a memory key may do: the one rule, from what the key is (read-only or read-write)
and the mode it is sent with (``mk_…:read`` retrieves but never stores, ``mk_…:write`` stores
but never retrieves, ``mk_…:off`` does neither; no suffix is ``full``).

The vault enforces it (``vault/rules/access.py``); the MCP scopes of a key
(``auth/scopes.py``), the explorer's sign-in, the sign-in pages and the chat proxy read it
from the key's ``KeyInfo`` instead of parsing the mode themselves. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Abilities:
    reads: bool  # search, list, inspect, export
    writes: bool  # store, forget, delete

    @property
    def full(self) -> bool:
        """Both: what consolidation (texts out, reflections in) and managing the vault's
        connected apps need."""
        return self.reads and self.writes


def abilities(read_only: bool, mode: str) -> Abilities:
    """Reading needs mode full or read; writing a key that is not read-only, in mode full or
    write."""
    return Abilities(
        reads=mode in ("full", "read"),
        writes=not read_only and mode in ("full", "write"),
    )
