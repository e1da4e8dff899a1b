"""A reflection that replaced earlier ones lists them when inspected (``replaced``), each
marked superseded by it, so its page can say what it replaced; a reflection that replaced
nothing, and a replaced one, carry no such list."""

from __future__ import annotations

from typing import Any

from tests.support import Vault
from tests.support.api import checkout, commit

BOSTON = "Ana lives in Boston, in a flat near the harbour, with her two cats."
DENVER = "Ana moved from Boston to Denver in June 2026; the two cats came along."


def reflect(vault: Vault, entry: dict[str, Any]) -> str:
    batch = checkout(vault, contract=2)
    done = commit(vault, batch["batch_id"], [entry])
    assert done.status_code == 200, done.text
    created: str = done.json()["created"][0]["id"]
    return created


def inspect(vault: Vault, memory_id: str) -> dict[str, Any]:
    response = vault.post("/v1/memory/inspect", {"memory_id": memory_id})
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def test_the_newer_reflection_lists_what_it_replaced(vault: Vault) -> None:
    vault.ingest(BOSTON, date="2026-01-05T10:00:00Z")
    old = reflect(vault, {"text": BOSTON, "importance": 6})
    assert "replaced" not in inspect(vault, old)
    vault.ingest(DENVER, date="2026-06-05T10:00:00Z")
    new = reflect(vault, {"text": DENVER, "importance": 7, "replaces": ["R1"]})
    page = inspect(vault, new)
    (row,) = page["replaced"]
    assert (row["id"], row["content"], row["tier"]) == (old, BOSTON, 2)
    assert row["superseded"]["by"] == new
    assert row["superseded"]["at"] == inspect(vault, old)["superseded"]["at"]
    assert "replaced" not in inspect(vault, old)  # replaced, and it replaced nothing
