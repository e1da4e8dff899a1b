"""The peers benchmark's corpus, its questions and their gold memories, from one seed.

Conversations of a user with an assistant over one year. Each conversation holds five facts (a
user statement and the assistant's answer, both holding the answer) and five pairs of small
talk. Every fact has a key (the person, project, book, ... or, for what the user did on a day,
the activity and the day) used by no other fact, so a question built from the key has exactly
the gold memories its generator wrote.

That makes recall easy to saturate: a question's names alone find its fact. The hard set
(``hard=True``) has a recurring cast instead: a dozen to 40 people (one per 250 memories), drawn
once per seed, are the people of every person fact and of half the small talk, so each full name
is in some 15 (1,000 memories) to 45 memories, more than the 10 that recall@10 looks at. A person
question is asked in other words than the statement's (the template's paraphrase), and where
the same person has several facts of one kind (two pets, two loans) it names the month too, so
the ranking has to use meaning and dates, not the name. The key of a cast fact is (kind, person,
month): the gold is still exactly the memories its generator wrote.
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
Kind = Literal["keyword", "paraphrase", "dated", "temporal"]
CAST = (12, 40)  # the fewest and most people in the hard set's recurring cast


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


@dataclass(frozen=True)
class Fact:
    say: str  # the user's statement
    ack: str  # the assistant's answer
    keyword: str  # a question in the statement's words
    paraphrase: str  # a question in other words; "" for what the user did on a day
    about: tuple[str, str, str] | None = None  # a cast fact's (template, first, last)
    month: str = ""  # when a cast fact was said


@dataclass
class Corpus:
    memories: list[Memory] = field(default_factory=list)
    facts: list[tuple[Fact, list[int]]] = field(default_factory=list)  # with its gold memories
    used_keys: set[tuple[str, ...]] = field(default_factory=set)
    texts: set[str] = field(default_factory=set)
    cast: list[tuple[str, str]] = field(default_factory=list)  # the hard set's people


def draw_cast(size: int, seed: int) -> list[tuple[str, str]]:
    """One person per 250 memories within ``CAST``, with distinct first and last names, from a
    stream of their own."""
    rng, count = Random(seed + 2), max(CAST[0], min(CAST[1], size // 250))
    return list(zip(rng.sample(FIRST, count), rng.sample(LAST, count), strict=True))


def _fact(rng: Random, corpus: Corpus, day: datetime) -> Fact:
    """A new fact whose key no earlier fact has."""
    if rng.random() < 0.12:
        done, do = rng.choice(ACTIVITIES)
        who, place = rng.choice(FIRST), rng.choice(CITIES)
        if corpus.cast:
            who = rng.choice(corpus.cast)[0]
        day_key = ("activity", done, day.date().isoformat())
        say, ack = (
            f"Today I {done} in {place} with {who}.",
            f"A good day in {place} with {who}, then.",
        )
        if day_key not in corpus.used_keys and not {say, ack} & corpus.texts:
            corpus.used_keys.add(day_key)
            corpus.texts.update((say, ack))
            written = f"{WEEKDAYS[day.weekday()]} {day.day} {MONTHS[day.month - 1]} {day.year}"
            return Fact(say, ack, f"Who did I {do} with on {written}?", "")
    while True:
        index = rng.randrange(len(TEMPLATES))
        tpl = TEMPLATES[index]
        slots = {name: draw(rng) for name, draw in tpl.slots.items()}
        slots["organ"] = ORGANS.get(slots.get("doctor", ""), "")
        persons = ("person", slots["first"], slots["last"]) if "first" in tpl.key else None
        key: tuple[str, ...] = (str(index), *(slots[k] for k in tpl.key))
        month = MONTHS[day.month - 1]
        if persons and corpus.cast:  # a recurring person: one fact of a kind a month
            slots["first"], slots["last"] = rng.choice(corpus.cast)
            persons, key = None, (str(index), slots["first"], slots["last"], month)
        if key in corpus.used_keys or persons in corpus.used_keys:
            continue  # a question must name exactly one fact
        say, ack = rng.choice(tpl.says).format(**slots), tpl.ack.format(**slots)
        if say in corpus.texts or ack in corpus.texts:
            continue  # every memory's text is unique, so a returned text names one memory
        corpus.used_keys.add(key)
        if persons:
            corpus.used_keys.add(persons)
        corpus.texts.update((say, ack))
        about = (str(index), slots["first"], slots["last"]) if len(key) == 4 else None
        keyword, paraphrase = tpl.keyword.format(**slots), tpl.paraphrase.format(**slots)
        return Fact(say, ack, keyword, paraphrase, about, month)


def _small_talk(rng: Random, cast: list[tuple[str, str]]) -> tuple[str, str]:
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
    # Half the small talk names the cast; all of it would run out of distinct texts at 10,000.
    if cast and rng.random() < 0.5:
        slots["first"], slots["last"] = rng.choice(cast)
    return user.format(**slots), assistant.format(**slots)


def build_corpus(size: int, seed: int, hard: bool = False) -> Corpus:
    rng = Random(seed)
    corpus = Corpus(cast=draw_cast(size, seed) if hard else [])
    start = datetime(2026, 1, 1, tzinfo=UTC)
    conversations = -(-size // TURNS)
    starts = sorted(
        start + timedelta(days=rng.randrange(365), hours=rng.randrange(7, 22))
        for _ in range(conversations)
    )
    for number_, begin in enumerate(starts):
        pairs: list[tuple[str, str, Fact | None]] = []
        for _ in range(TURNS // 4):
            new = _fact(rng, corpus, begin)
            pairs.append((new.say, new.ack, new))
        while len(pairs) < TURNS // 2:
            user, assistant = _small_talk(rng, corpus.cast)
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
                corpus.facts.append((fact, [first, first + 1]))
    del corpus.memories[size:]
    return corpus


def build_queries(corpus: Corpus, count: int, seed: int) -> list[Query]:
    """``count`` questions: 15% about a day, the rest half keyword, half paraphrase."""
    rng = Random(seed + 1)
    size = len(corpus.memories)
    facts = [(f, gold) for f, gold in corpus.facts if max(gold) < size]
    rng.shuffle(facts)
    temporal = [(f, g) for f, g in facts if not f.paraphrase][: round(count * 0.15)]
    others = [(f, g) for f, g in facts if f.paraphrase][: count - len(temporal)]
    queries = [Query(f.keyword, "temporal", frozenset(g)) for f, g in temporal]
    for i, (fact, gold) in enumerate(others):
        paraphrased = i % 2 == 1
        kind: Kind = "paraphrase" if paraphrased else "keyword"
        text = fact.paraphrase if paraphrased else fact.keyword
        queries.append(Query(text, kind, frozenset(gold)))
    rng.shuffle(queries)
    return queries


def build_hard_queries(corpus: Corpus, count: int, seed: int) -> list[Query]:
    """``count`` questions on a corpus built with ``hard=True``: 15% about a day as above, the
    rest about the cast, in other words than the statement's; "dated" where the person has
    another fact of the same kind (then the month tells them apart), else "paraphrase"."""
    rng = Random(seed + 1)
    size = len(corpus.memories)
    facts = [(f, gold) for f, gold in corpus.facts if max(gold) < size]
    rng.shuffle(facts)
    seen: dict[tuple[str, str, str], int] = {}
    for fact, _ in facts:
        if fact.about:
            seen[fact.about] = seen.get(fact.about, 0) + 1
    temporal = [(f, g) for f, g in facts if not f.paraphrase][: round(count * 0.15)]
    cast = [(f, g) for f, g in facts if f.about][: count - len(temporal)]
    queries = [Query(f.keyword, "temporal", frozenset(g)) for f, g in temporal]
    for fact, gold in cast:
        assert fact.about is not None
        if seen[fact.about] == 1:
            queries.append(Query(fact.paraphrase, "paraphrase", frozenset(gold)))
            continue
        text = f"In {fact.month}, {fact.paraphrase[0].lower()}{fact.paraphrase[1:]}"
        queries.append(Query(text, "dated", frozenset(gold)))
    rng.shuffle(queries)
    return queries
