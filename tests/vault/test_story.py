"""A page of hits that covers the whole story: spread over conversations and tiers, one
place per split message, newer facts no lower than older ones, and the time a question
names. Over the REST API of a real store, with the concept embedder through the seam."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from mcp_memoryrouter.vault.rules.dates import to_ms
from mcp_memoryrouter.vault.search.embeddings import Embedders
from tests.support import Vault
from tests.support.store import search
from tests.vault.embedders import ConceptEmbedder


@pytest.fixture
def vault_embedders() -> Embedders:
    return Embedders({"concepts": ConceptEmbedder}, "concepts")


TOLD: dict[str, str] = {}  # text -> the session it was said in (rows do not carry it)


def say(vault: Vault, session: str, date: str, *turns: tuple[str, str]) -> None:
    """One conversation: (role, text) turns a minute apart from ``date`` (a day)."""
    TOLD.update({text: session for _, text in turns})
    messages = [
        {"role": role, "content": text, "date": f"{date}T10:{i:02d}:00Z"}
        for i, (role, text) in enumerate(turns)
    ]
    response = vault.post("/v1/memory/ingest", {"messages": messages, "session_id": session})
    assert response.status_code == 202, response.text


def sessions(rows: list[dict[str, Any]]) -> list[str]:
    return [TOLD.get(row["content"], "a unit of a long message") for row in rows]


FILLER = [
    ("user", "The weather is grey and windy today."),
    ("assistant", "A good day for a film or a book, then."),
]


def dog_stories(vault: Vault) -> None:
    # One conversation dwells on the dog: five turns and a long answer split into units.
    long_answer = "A new dog needs a routine for feeding and walks, and a quiet corner. " * 60
    say(
        vault,
        "dwell",
        "2026-01-10",
        ("user", "We adopted a dog from the shelter, a beagle called Rex."),
        ("assistant", "Congratulations on the dog!"),
        ("user", "The dog chewed a cable, what a dog."),
        ("user", "Took the dog to the vet, the dog is fine."),
        ("user", "Should I buy the dog a bigger bed?"),
        ("assistant", long_answer),
    )
    # Three other conversations tell of another dog each, as plainly.
    for n, (date, text) in enumerate(
        [
            ("2026-03-02", "My sister gave us her dog, a calm old dog."),
            ("2026-05-20", "We look after the neighbour's dog, a lively dog."),
            ("2026-08-14", "The kids got a second dog, a tiny dog."),
        ]
    ):
        say(vault, f"other-{n}", date, *FILLER, ("user", text), ("assistant", f"A dog! ({n})"))
    vault.worker.drain()


def test_one_conversation_does_not_take_the_page(vault: Vault) -> None:
    dog_stories(vault)
    rows = search(vault, "dog", limit=5)
    assert len(rows) == 5
    assert len(set(sessions(rows))) >= 3, sessions(rows)
    # the long answer's units take one place at most
    assert sum(row["content"].startswith("A new dog needs") for row in rows) <= 1
    # the best hit still comes first, and each row keeps its own score
    assert rows[0]["content"].startswith("A new dog needs")
    best = search(vault, "dog", limit=50)
    assert {r["id"]: r["score"] for r in rows}.items() <= {
        r["id"]: r["score"] for r in best
    }.items()


def test_prepare_and_date_search_spread_the_page_too(vault: Vault) -> None:
    dog_stories(vault)
    response = vault.post("/v1/memory/prepare", {"query": "dog", "context_limit": 3})
    assert response.status_code == 200, response.text
    context = response.json()["context"]
    told = {TOLD[text] for text in TOLD if text in context}
    assert len(told) >= 2, context
    response = vault.post(
        "/v1/memory/date-search",
        {"from": "2026-01-01", "to": "2026-12-31", "query": "dog", "max_tokens": 2000},
    )
    rows = response.json()["memories"][:5]
    assert len(set(sessions(rows))) >= 3, sessions(rows)


def test_a_newer_fact_ranks_no_lower_than_the_older(vault: Vault) -> None:
    say(vault, "march", "2025-03-01", *FILLER, ("user", "My car is a red Fiat."))
    say(vault, "october", "2025-10-01", *FILLER, ("user", "My car is a blue Volvo now."))
    vault.worker.drain()
    rows = search(vault, "what is my car", limit=5)
    told = [row["content"] for row in rows]
    assert "My car is a red Fiat." in told  # both stay visible, dated
    assert told.index("My car is a blue Volvo now.") < told.index("My car is a red Fiat.")
    assert all(row["date"] for row in rows)


def test_a_clearly_better_older_hit_keeps_its_place(vault: Vault) -> None:
    say(vault, "march", "2025-03-01", ("user", "I live in Lyon, I live in Lyon, live in Lyon."))
    say(vault, "october", "2025-10-01", ("user", "We went to a live show in Lisbon."))
    vault.worker.drain()
    rows = [row["content"] for row in search(vault, "where do I live in Lyon", limit=5)]
    assert rows[0].startswith("I live in Lyon")


COOKED = [
    ("2025-05-12", "I cooked risotto."),
    ("2026-05-09", "I cooked tagine at home."),
    ("2026-02-03", "Cooked soup again."),
]


@pytest.mark.parametrize(
    ("question", "as_of"),
    [
        ("what did I cook last month?", "2026-06-15"),
        ("what did I cook in May?", "2026-06-15T08:00:00Z"),
        ("what did I cook about a month ago?", "2026-06-10"),
    ],
)
def test_a_question_naming_a_time_prefers_what_happened_then(
    vault: Vault, question: str, as_of: str
) -> None:
    for n, (date, text) in enumerate(COOKED):
        say(vault, f"c{n}", date, *FILLER, ("user", text))
    vault.worker.drain()
    rows = search(vault, question, as_of=as_of, limit=3)
    assert rows[0]["content"] == "I cooked tagine at home."
    # a boost, not a filter: the others are still found
    assert len(rows) == 3


def test_without_as_of_the_time_counts_from_now(vault: Vault) -> None:
    for n, (date, text) in enumerate(COOKED):
        say(vault, f"c{n}", date, *FILLER, ("user", text))
    vault.worker.drain()
    vault.clock.now_ms = to_ms(datetime(2026, 6, 15, tzinfo=UTC))
    rows = search(vault, "what did I cook last month?", limit=3)
    assert rows[0]["content"] == "I cooked tagine at home."
    then = rows[0]["score"]
    # the server's own clock a year on: last month is another month, nothing is preferred
    vault.clock.now_ms = to_ms(datetime(2027, 6, 15, tzinfo=UTC))
    rows = search(vault, "what did I cook last month?", limit=3)
    tagine = next(row for row in rows if row["content"] == "I cooked tagine at home.")
    assert tagine["score"] < then


def test_explicit_dates_are_not_second_guessed(vault: Vault) -> None:
    for n, (date, text) in enumerate(COOKED):
        say(vault, f"c{n}", date, *FILLER, ("user", text))
    vault.worker.drain()
    response = vault.post(
        "/v1/memory/date-search",
        {"from": "2025-01-01", "to": "2025-12-31", "query": "what did I cook in May?"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["memories"][0]["content"].startswith("I cooked risotto")


def test_a_bad_as_of_is_400_by_field(vault: Vault) -> None:
    response = vault.post("/v1/memory/search", {"query": "cook", "as_of": "last tuesday"})
    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == "as_of"
    response = vault.post("/v1/memory/prepare", {"query": "cook", "as_of": 5})
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("question", "as_of"),
    [
        ("what did I cook 3000 years ago?", None),
        ("what will I cook in december 9999?", None),
        ("what did I cook 99999999999999 days ago?", None),
        ("what did I cook last year?", "0001-01-01"),
        ("what did I cook yesterday?", "0001-01-01T00:00:00Z"),
        ("what am I cooking this year?", "9999-12-31"),
        ("what am I cooking today?", "9999-12-31T23:59:59.999Z"),
    ],
)
def test_a_question_naming_a_time_out_of_range_is_answered_on_search_and_prepare(
    vault: Vault, question: str, as_of: str | None
) -> None:
    say(vault, "c", "2026-05-09", ("user", "I cooked tagine at home."))
    vault.worker.drain()
    body = {"query": question, **({"as_of": as_of} if as_of else {})}
    found = vault.post("/v1/memory/search", body)
    assert found.status_code == 200, found.text
    assert [row["content"] for row in found.json()["memories"]] == ["I cooked tagine at home."]
    prepared = vault.post("/v1/memory/prepare", body)
    assert prepared.status_code == 200, prepared.text
    assert "tagine" in prepared.json()["context"]
