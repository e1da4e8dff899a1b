"""Search has a relevance floor: a hit is kept when it matched a query word or its meaning
clears the embedding model's floor, never because min-max fusion ranked it last (with the real
local model, as ``serve`` composes the vault)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.vault.test_read_your_writes import Served

UNRELATED = (
    "We chose Postgres for auth.",
    "Ana prefers tea in the morning.",
    "The cat sleeps on the sofa all afternoon.",
    "Tax forms are due in April.",
    "Booked a dentist appointment for Tuesday.",
    "The kitchen tap is leaking again.",
    "Maria sent photos from her hiking trip in Norway.",
    "Renewed the car insurance online.",
    "Planted tomatoes and basil in the garden.",
    "The quarterly report needs two more charts.",
    "Dinner with Tom at the new Thai place.",
    "Lost my umbrella on the train.",
)
GUITAR = (
    "I practice guitar every evening after work.",
    "My guitar teacher moved to Lyon.",
    "Bought new guitar strings today.",
    "The guitar recital is on Friday.",
)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    vault = Served(tmp_path)
    vault.ingest(*UNRELATED[:6])
    vault.ingest(*UNRELATED[6:])
    vault.ingest(*GUITAR)
    assert vault.pending() == 0  # every memory has its vector
    yield vault
    vault.http.close()
    vault.service.close()


def search(vault: Served, query: str, limit: int = 20) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = vault.post("/v1/memory/search", {"query": query, "limit": limit})[
        "memories"
    ]  # type: ignore[assignment]
    return rows


def test_a_query_matching_four_of_sixteen_memories_returns_those_four(served: Served) -> None:
    rows = search(served, "guitar")
    assert sorted(m["content"] for m in rows) == sorted(GUITAR)  # not 16 rows
    assert all(m["score"] > 0 for m in rows)  # no 0.0 tail


def test_a_query_that_matches_nothing_returns_nothing(served: Served) -> None:
    assert search(served, "quantum chromodynamics") == []


def test_a_memory_found_by_meaning_alone_is_kept_and_the_unrelated_are_not(
    served: Served,
) -> None:
    # no word of the query is in any memory: only the vectors can answer
    found = [m["content"] for m in search(served, "which database")]
    assert "We chose Postgres for auth." in found
    assert not set(GUITAR) & set(found)
