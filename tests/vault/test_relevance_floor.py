"""Search has a relevance floor: a hit is kept when it matched a query word or its meaning
clears the embedding model's floor, never because min-max fusion ranked it last (with the real
local model, as ``serve`` composes the vault)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.store import GUITAR, UNRELATED, ComposedVault


@pytest.fixture(scope="module")
def composed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposedVault]:
    """One vault for the module: its tests only search it."""
    vault = ComposedVault(tmp_path_factory.mktemp("composed"))
    vault.ingest(*UNRELATED[:6])
    vault.ingest(*UNRELATED[6:])
    vault.ingest(*GUITAR)
    assert vault.service.worker is not None
    vault.service.worker.drain()
    assert vault.pending() == 0  # every memory has its vector
    yield vault
    vault.http.close()
    vault.service.close()


def search(vault: ComposedVault, query: str, limit: int = 20) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = vault.post("/v1/memory/search", {"query": query, "limit": limit})[
        "memories"
    ]  # type: ignore[assignment]
    return rows


def test_a_query_matching_four_of_sixteen_memories_returns_those_four(
    composed: ComposedVault,
) -> None:
    rows = search(composed, "guitar")
    assert sorted(m["content"] for m in rows) == sorted(GUITAR)  # not 16 rows
    assert all(m["score"] > 0 for m in rows)  # no 0.0 tail


def test_a_query_that_matches_nothing_returns_nothing(composed: ComposedVault) -> None:
    assert search(composed, "quantum chromodynamics") == []


def test_a_memory_found_by_meaning_alone_is_kept_and_the_unrelated_are_not(
    composed: ComposedVault,
) -> None:
    # no word of the query is in any memory: only the vectors can answer
    found = [m["content"] for m in search(composed, "which database")]
    assert "We chose Postgres for auth." in found
    assert not set(GUITAR) & set(found)
