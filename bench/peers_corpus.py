"""The peers benchmark's corpus, its questions and their gold memories, from one seed.

Conversations of a user with an assistant over one year. Each conversation holds five facts (a
user statement and the assistant's answer, both holding the answer) and five pairs of small
talk. Every fact has a key (the person, project, book, ... or, for what the user did on a day,
the activity and the day) used by no other fact, so a question built from the key has exactly
the gold memories its generator wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from random import Random
from typing import Literal

from bench.peers_templates import (
    ACTIVITIES,
    CITIES,
    FIRST,
    LAST,
    MONTHS,
    ORGANS,
    SMALL_TALK,
    TEMPLATES,
    TOPICS,
    WEATHER,
    WEEKDAYS,
)

TURNS = 20  # memories per conversation
Kind = Literal["keyword", "paraphrase", "temporal"]


@dataclass(frozen=True)
class Memory:
    text: str
    date: str  # ISO, UTC
    role: Literal["user", "assistant"]
    conversation: int


@dataclass(frozen=True)
class Query:
    text: str
    kind: Kind
    gold: frozenset[int]  # corpus indexes holding the answer


@dataclass
class Corpus:
    memories: list[Memory] = field(default_factory=list)
    facts: list[tuple[str, str, str, list[int]]] = field(default_factory=list)  # kw, para, kind
    used_keys: set[tuple[str, ...]] = field(default_factory=set)
    texts: set[str] = field(default_factory=set)


def _fact(rng: Random, corpus: Corpus, day: datetime) -> tuple[str, str, str, str]:
    """A new fact: (statement, answer, keyword question, paraphrase question)."""
    if rng.random() < 0.12:
        done, do = rng.choice(ACTIVITIES)
        who, place = rng.choice(FIRST), rng.choice(CITIES)
        day_key = ("activity", done, day.date().isoformat())
        say, ack = (
            f"Today I {done} in {place} with {who}.",
            f"A good day in {place} with {who}, then.",
        )
        if day_key not in corpus.used_keys and not {say, ack} & corpus.texts:
            corpus.used_keys.add(day_key)
            corpus.texts.update((say, ack))
            written = f"{WEEKDAYS[day.weekday()]} {day.day} {MONTHS[day.month - 1]} {day.year}"
            return say, ack, f"Who did I {do} with on {written}?", ""
    while True:
        index = rng.randrange(len(TEMPLATES))
        tpl = TEMPLATES[index]
        slots = {name: draw(rng) for name, draw in tpl.slots.items()}
        slots["organ"] = ORGANS.get(slots.get("doctor", ""), "")
        persons = ("person", slots["first"], slots["last"]) if "first" in tpl.key else None
        key: tuple[str, ...] = (str(index), *(slots[k] for k in tpl.key))
        if key in corpus.used_keys or persons in corpus.used_keys:
            continue  # a question must name exactly one fact
        say, ack = rng.choice(tpl.says).format(**slots), tpl.ack.format(**slots)
        if say in corpus.texts or ack in corpus.texts:
            continue  # every memory's text is unique, so a returned text names one memory
        corpus.used_keys.add(key)
        if persons:
            corpus.used_keys.add(persons)
        corpus.texts.update((say, ack))
        return say, ack, tpl.keyword.format(**slots), tpl.paraphrase.format(**slots)


def _small_talk(rng: Random) -> tuple[str, str]:
    user, assistant = rng.choice(SMALL_TALK)
    slots = {
        "n": str(rng.randrange(2, 60)),
        "h": str(rng.randrange(1, 12)),
        "first": rng.choice(FIRST),
        "last": rng.choice(LAST),
        "topic": rng.choice(TOPICS),
        "city": rng.choice(CITIES),
        "weather": rng.choice(WEATHER).capitalize(),
    }
    return user.format(**slots), assistant.format(**slots)


def build_corpus(size: int, seed: int) -> Corpus:
    rng = Random(seed)
    corpus = Corpus()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    conversations = -(-size // TURNS)
    starts = sorted(
        start + timedelta(days=rng.randrange(365), hours=rng.randrange(7, 22))
        for _ in range(conversations)
    )
    for number_, begin in enumerate(starts):
        pairs: list[tuple[str, str, tuple[str, str, str] | None]] = []
        for _ in range(TURNS // 4):
            say, ack, keyword, paraphrase = _fact(rng, corpus, begin)
            kind = "temporal" if not paraphrase else "fact"
            pairs.append((say, ack, (keyword, paraphrase, kind)))
        while len(pairs) < TURNS // 2:
            user, assistant = _small_talk(rng)
            if user not in corpus.texts and assistant not in corpus.texts:
                corpus.texts.update((user, assistant))
                pairs.append((user, assistant, None))
        rng.shuffle(pairs)
        for turn, (user, assistant, fact) in enumerate(pairs):
            at = begin + timedelta(minutes=4 * turn)
            first = len(corpus.memories)
            for offset, (text, role) in enumerate(((user, "user"), (assistant, "assistant"))):
                stamp = (at + timedelta(minutes=2 * offset)).strftime("%Y-%m-%dT%H:%M:%SZ")
                corpus.memories.append(Memory(text, stamp, role, number_))  # type: ignore[arg-type]
            if fact is not None:
                corpus.facts.append((*fact, [first, first + 1]))
    del corpus.memories[size:]
    return corpus


def build_queries(corpus: Corpus, count: int, seed: int) -> list[Query]:
    """``count`` questions: 15% about a day, the rest half keyword, half paraphrase."""
    rng = Random(seed + 1)
    size = len(corpus.memories)
    facts = [f for f in corpus.facts if max(f[3]) < size]
    rng.shuffle(facts)
    temporal = [f for f in facts if f[2] == "temporal"][: round(count * 0.15)]
    others = [f for f in facts if f[2] != "temporal"][: count - len(temporal)]
    queries = [Query(f[0], "temporal", frozenset(f[3])) for f in temporal]
    for i, (keyword, paraphrase, _, gold) in enumerate(others):
        paraphrased = i % 2 == 1
        kind: Kind = "paraphrase" if paraphrased else "keyword"
        queries.append(Query(paraphrase if paraphrased else keyword, kind, frozenset(gold)))
    rng.shuffle(queries)
    return queries
