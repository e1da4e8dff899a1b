"""What a memory key may do: one rule (abilities.py), read the same way by the vault's
access checks and the key's MCP scopes."""

from __future__ import annotations

import pytest

from mcp_memoryrouter.abilities import abilities
from mcp_memoryrouter.auth.scopes import SCOPE_WORDS, ability, scopes_for_key
from mcp_memoryrouter.vault.rules.access import Access

# (read_only, mode): (reads, writes)
TABLE = {
    (False, "full"): (True, True),
    (False, "read"): (True, False),
    (False, "write"): (False, True),
    (False, "off"): (False, False),
    (True, "full"): (True, False),
    (True, "read"): (True, False),
    (True, "write"): (False, False),
    (True, "off"): (False, False),
}


@pytest.mark.parametrize(("key", "expected"), TABLE.items())
def test_a_key_reads_in_mode_full_or_read_and_writes_unless_read_only_in_full_or_write(
    key: tuple[bool, str], expected: tuple[bool, bool]
) -> None:
    may = abilities(*key)
    assert (may.reads, may.writes) == expected
    assert may.full == all(expected)


@pytest.mark.parametrize("key", TABLE)
def test_the_vault_and_the_mcp_scopes_read_the_same_rule(key: tuple[bool, str]) -> None:
    read_only, mode = key
    may = abilities(read_only, mode)
    access = Access("v", "vr_x", read_only, mode)  # type: ignore[arg-type]
    assert (access.can_read, access.can_write) == (may.reads, may.writes)
    scopes = scopes_for_key(read_only, mode)
    assert ("memories:read" in scopes) == may.reads
    assert ("memories:write" in scopes) == ("memories:delete" in scopes) == may.writes
    assert ("memories:reflect" in scopes) == may.full


def test_a_refusal_names_a_scope_in_the_consent_pages_words() -> None:
    assert ability("memories:read") == "read your memories"
    assert all(ability(scope) == words.lower() for scope, words in SCOPE_WORDS.items())
