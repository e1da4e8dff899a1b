"""This server against the MCP memory servers a user would otherwise pick, on one corpus.

    python bench/peers.py [--size 10000] [--queries 200] [--seed 7]

The same generated corpus (dated conversational memories) and the same natural-language
questions go through MCP to three systems, each its own process:

- ours: ``mcp-memoryrouter serve`` (``local`` embedder), the SDK's Streamable HTTP client,
  ``store_memory`` once per memory (the tool takes one), ``search_memories`` with limit 10;
- ``@modelcontextprotocol/server-memory`` (npm), stdio: one entity per conversation whose
  observations are its memories (its README: entities for events, observations for atomic
  facts), ``create_entities`` once per conversation, ``search_nodes``;
- ``basic-memory`` (PyPI), stdio ``basic-memory mcp``: one note per memory (``write_note``),
  ``search_notes`` with page_size 10. It needs Python >= 3.12; without one its column says why.

Peers are installed on first run into ``bench/.peers/`` (git-ignored), printing each step;
basic-memory's venv is made with a Python >= 3.12 found on the machine (``PEERS_PYTHON``, PATH,
pyenv). basic-memory stores a note in ~0.3-1 s here, so 10,000 take hours: ``--only
server-memory`` leaves it out, ``--size 1000`` runs all three in minutes.
Ingest is timed twice: until the last write is acknowledged, and until the last memory is
searchable (ours: no embeddings pending). Recall@10: the share of questions with a gold memory
among the first 10 memories returned, mapped back to the corpus by exact text. RSS: the server
process's resident memory, peak (sampled every 0.2 s) and at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from random import Random
from typing import Any, Literal

import anyio
import httpx2
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import p50, p95, server, table

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = ROOT / "bench" / ".peers"
SERVER_MEMORY = "@modelcontextprotocol/server-memory@2026.8.31"
BASIC_MEMORY = "basic-memory==0.24.1"
TURNS = 20  # memories per conversation
Kind = Literal["keyword", "paraphrase", "temporal"]

# ---------------------------------------------------------------------------------------------
# The corpus: conversations of a user with an assistant over one year. Each conversation holds
# five facts (a user statement and the assistant's answer, both holding the answer) and five
# pairs of small talk. Every fact has a key (the person, project, book, ... or, for what the
# user did on a day, the activity and the day) used by no other fact, so a question built from
# the key has exactly the gold memories its generator wrote.


def words(text: str) -> list[str]:
    return text.split()


def phrases(text: str) -> list[str]:
    return text.split(", ")


FIRST = words(
    "Amara Bruno Chiara Dmitri Elena Farid Greta Hugo Ines Jonas Keiko Lars Maya Nikolai "
    "Olga Pablo Quinn Rosa Sven Tariq Ulla Viktor Wanda Xavier Yara Zeno Alma Bastian Clara "
    "Dario Edith Felix Gemma Henrik Ilse Joaquin Katya Luca Mirela Nadia Oskar Petra Rafael "
    "Selma Tobias Uma Vera Wim Yusuf Zora Anouk Bram Celine Diego Esra Fenna Goran Hana Ivo"
)
LAST = words(
    "Abbott Brennan Castillo Dvorak Eriksen Fontaine Gallagher Haddad Ivanova Jansen Kowalski "
    "Lindqvist Moreau Nakamura Okafor Petrov Quintero Rinaldi Schreiber Takahashi Ulrich Varga "
    "Whitfield Xu Yilmaz Zimmermann Achterberg Bianchi Carvalho Delacroix Engel Ferreira Gruber "
    "Hoffmann Iversen Jovanovic Keller Lambert Marchetti Novak Olsen Pereira Rossi Sandoval "
    "Toivonen Unger Vasquez Weber Amsel Borg Costa Duarte Eklund Falk Greco Holm Ibsen Jaeger"
)
CITIES = words(
    "Lisbon Porto Valencia Seville Lyon Marseille Bordeaux Ghent Utrecht Leipzig Dresden "
    "Krakow Gdansk Brno Ljubljana Zagreb Split Thessaloniki Tallinn Riga Vilnius Bergen "
    "Aarhus Malmo Turin Bologna Naples Palermo Graz Salzburg Basel Geneva Cork Galway "
    "Edinburgh Bristol Leeds Antwerp Rotterdam Innsbruck"
)
ADJ = words(
    "Amber Silver Quiet Hidden Golden Crimson Northern Wandering Velvet Copper Hollow Bright "
    "Distant Frozen Gentle Iron Lucky Marble Painted Scarlet"
)
NOUN = words(
    "Heron Lantern Orchard Harbor Falcon Meadow Compass Willow Anchor Canyon Sparrow Garden "
    "Beacon River Thistle Lighthouse Fox Maple Pebble Tide"
)
WEEKDAYS = words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
MONTHS = words(
    "January February March April May June July August September October November December"
)
ORGANS = {
    "dentist": "my teeth",
    "dermatologist": "the rash on my arm",
    "optician": "my eyesight",
    "physiotherapist": "my sore back",
    "cardiologist": "my heart",
    "allergist": "the hay fever",
}


def pick(*pools: Sequence[str]) -> Callable[[Random], str]:
    return lambda rng: " ".join(rng.choice(pool) for pool in pools)


def number(low: int, high: int, step: int = 1) -> Callable[[Random], str]:
    return lambda rng: str(rng.randrange(low, high, step))


def clock(rng: Random) -> str:
    return f"{rng.randrange(8, 18)}:{rng.choice(['00', '15', '30', '45', '10', '40'])}"


def flight(rng: Random) -> str:
    return f"{rng.choice(['TP', 'LH', 'KL', 'AF', 'IB', 'SK'])}{rng.randrange(100, 9999)}"


@dataclass(frozen=True)
class Template:
    slots: dict[str, Callable[[Random], str]]
    key: tuple[str, ...]  # the slots a question names; never shared by two facts
    says: tuple[str, ...]  # what the user says (one variant is drawn)
    ack: str  # what the assistant answers; holds the answer too
    keyword: str  # a question in the statement's own words
    paraphrase: str  # a question in other words


PERSON = {"first": pick(FIRST), "last": pick(LAST)}
TEMPLATES = (
    Template(
        {
            **PERSON,
            "rel": pick(["sister", "brother", "cousin", "aunt", "uncle", "niece"]),
            "city": pick(CITIES),
            "company": pick(ADJ, ["Labs", "Systems", "Foods", "Logistics"]),
        },
        ("first", "last"),
        (
            "My {rel} {first} {last} just moved to {city} to work for {company}.",
            "Big news: {first} {last}, my {rel}, relocated to {city} for a job at {company}.",
        ),
        "{city} is a lovely place, I hope {first} settles in well at {company}.",
        "Where did my {rel} {first} {last} move to?",
        "Which town is {first} {last} based in these days?",
    ),
    Template(
        {
            **PERSON,
            "color": pick(["black", "ginger", "grey", "white", "spotted", "brown"]),
            "animal": pick(["cat", "dog", "rabbit", "parrot", "tortoise", "ferret"]),
            "pet": pick(
                [
                    "Biscuit",
                    "Pepper",
                    "Mochi",
                    "Ziggy",
                    "Olive",
                    "Turbo",
                    "Noodle",
                    "Waffles",
                    "Juniper",
                    "Pickles",
                    "Sprout",
                    "Domino",
                ]
            ),
        },
        ("first", "last"),
        ("{first} {last} adopted a {color} {animal} from the shelter and named it {pet}.",),
        "{pet} is a great name for {first}'s {color} {animal}!",
        "What did {first} {last} name the {animal} from the shelter?",
        "What is the new pet of {first} {last} called?",
    ),
    Template(
        {"dlast": pick(LAST), "doctor": pick(list(ORGANS)), "day": pick(WEEKDAYS), "time": clock},
        ("dlast",),
        (
            "I booked the {doctor} appointment with Dr. {dlast} for {day} at {time}.",
            "Reminder for me: {doctor}, Dr. {dlast}, {day} {time}.",
        ),
        "Okay, {day} at {time} with the {doctor}, I will remind you.",
        "When is my {doctor} appointment with Dr. {dlast}?",
        "What day do I see Dr. {dlast} about {organ}?",
    ),
    Template(
        {
            **PERSON,
            "amount": number(40, 900, 5),
            "purpose": pick(
                [
                    "car repair",
                    "rent",
                    "concert tickets",
                    "new laptop",
                    "vet bill",
                    "moving van",
                    "dental work",
                    "ski trip",
                ]
            ),
            "month": pick(MONTHS),
        },
        ("first", "last"),
        (
            "I lent {first} {last} {amount} euros for the {purpose}; "
            "they promised to pay me back in {month}.",
        ),
        "Noted: {first} owes you {amount} euros, due in {month}.",
        "How much money did I lend {first} {last} for the {purpose}?",
        "What sum does {first} {last} still owe me?",
    ),
    Template(
        {
            **PERSON,
            "gift": pick(
                ["a " + a for a in ("leather", "wooden", "vintage", "handmade")],
                ["notebook", "watch", "chess set", "scarf", "teapot", "lamp"],
            ),
            "store": pick(ADJ, ["Market", "Emporium", "Boutique"]),
        },
        ("first", "last"),
        ("For {first} {last}'s birthday I'm buying {gift} from {store}.",),
        "{gift} sounds like a thoughtful present.",
        "What birthday gift am I buying {first} {last}?",
        "Which present did I pick out for {first} {last}?",
    ),
    Template(
        {
            "city": pick(CITIES),
            "reason": pick(["conference", "wedding", "holiday", "hackathon"]),
            "flight": flight,
            "day": pick(WEEKDAYS),
        },
        ("city", "reason"),
        ("We're flying to {city} for the {reason} on flight {flight}, leaving {day} morning.",),
        "Flight {flight} to {city} on {day}, got it.",
        "What is the flight number for the {reason} trip to {city}?",
        "Which plane do we take to {city} for the {reason}?",
    ),
    Template(
        {
            **PERSON,
            "dish": pick(["lasagna", "curry", "banana bread", "paella", "goulash"]),
            "grams": number(50, 800, 25),
            "ingredient": pick(["butter", "flour", "sugar", "rice", "lentils", "cheese"]),
            "spice": pick(["cumin", "nutmeg", "paprika", "saffron", "cinnamon"]),
        },
        ("first", "last"),
        (
            "{first} {last}'s {dish} recipe needs {grams} grams of {ingredient} "
            "and a pinch of {spice}.",
        ),
        "{grams} grams of {ingredient}, I'll remember that.",
        "How many grams of {ingredient} go into {first} {last}'s {dish}?",
        "How much {ingredient} does {first} {last} put in that dish?",
    ),
    Template(
        {
            **PERSON,
            "brand": pick(["Volvo", "Fiat", "Skoda", "Peugeot", "Toyota", "Opel"]),
            "price": number(1500, 25000, 100),
        },
        ("first", "last"),
        ("{first} {last} finally sold the old {brand} for {price} euros.",),
        "{price} euros for the {brand} is a fair deal.",
        "How much did {first} {last} sell the {brand} for?",
        "What price did {first} {last} get for their old car?",
    ),
    Template(
        {
            "project": pick(ADJ, NOUN),
            "tech": pick(["Postgres", "Kafka", "Redis", "Rust", "Elixir", "GraphQL", "Terraform"]),
            "tech2": pick(["MySQL", "RabbitMQ", "Memcached", "Go", "Scala", "REST", "Ansible"]),
        },
        ("project",),
        ("For the {project} project we decided to go with {tech} instead of {tech2}.",),
        "Good call, {tech} fits {project} better than {tech2}.",
        "What did we decide to use for the {project} project?",
        "Which technology was chosen for {project} in the end?",
    ),
    Template(
        {
            **PERSON,
            "instrument": pick(
                ["cello", "piano", "violin", "drums", "saxophone", "ukulele", "harp"]
            ),
            "teacher": pick(FIRST),
            "day": pick(WEEKDAYS),
        },
        ("first", "last"),
        (
            "{first} {last} started {instrument} lessons with a teacher called {teacher} "
            "every {day}.",
        ),
        "Learning the {instrument} is so rewarding, {teacher} sounds patient.",
        "What lessons did {first} {last} start with {teacher}?",
        "Which musical instrument is {first} {last} learning to play?",
    ),
    Template(
        {
            "restaurant": pick(["The"], ADJ, NOUN),
            "city": pick(CITIES),
            "dish": pick(["risotto", "sea bass", "ramen", "steak", "gnocchi", "tagine"]),
            "price": number(9, 60),
        },
        ("restaurant",),
        ("Dinner at {restaurant} in {city} was great, the {dish} cost {price} euros.",),
        "{price} euros for the {dish} at {restaurant} sounds reasonable.",
        "How much was the {dish} at {restaurant}?",
        "What did we pay for the main course at {restaurant}?",
    ),
    Template(
        {"book": pick(["A"], ADJ, NOUN), "author": pick(FIRST, LAST), "chapter": number(2, 40)},
        ("book",),
        ("I'm reading '{book}' by {author} and I'm on chapter {chapter} now.",),
        "Chapter {chapter} already, you're flying through {book}.",
        "Which chapter of '{book}' am I on?",
        "How far have I got in {book} by {author}?",
    ),
    Template(
        {
            **PERSON,
            "race": pick(["half marathon", "10k", "marathon", "trail run"]),
            "city": pick(CITIES),
            "time": lambda rng: (
                f"{rng.randrange(0, 4)}:{rng.randrange(10, 60)}:{rng.randrange(10, 60)}"
            ),
        },
        ("first", "last"),
        ("{first} {last} ran the {city} {race} in {time}.",),
        "{time} is a strong result for the {race}!",
        "What was {first} {last}'s time in the {city} {race}?",
        "How fast did {first} {last} finish the race?",
    ),
    Template(
        {**PERSON, "num": number(2, 300), "street": pick(NOUN), "apt": number(1, 60)},
        ("first", "last"),
        ("{first} {last}'s new address is {num} {street} Street, apartment {apt}.",),
        "Saved: {num} {street} Street, apartment {apt}.",
        "What is {first} {last}'s new address?",
        "Where is {first} {last}'s new flat?",
    ),
    Template(
        {
            "company": pick(ADJ, ["Analytics", "Robotics", "Textiles", "Pharma"]),
            "day": number(1, 29),
            "month": pick(MONTHS),
            "room": number(100, 700),
        },
        ("company",),
        ("The quarterly review with {company} moved to {day} {month}, room {room}.",),
        "Updated: {company} review on {day} {month} in room {room}.",
        "When is the quarterly review with {company}?",
        "What date did the {company} meeting get pushed to?",
    ),
)
# What the user did on a day: the question names the activity and the day, written out.
ACTIVITIES = (
    ("went bouldering", "go bouldering"),
    ("played tennis", "play tennis"),
    ("went kayaking", "go kayaking"),
    ("saw a play", "see a play"),
    ("went to a jazz concert", "go to a jazz concert"),
    ("had brunch", "have brunch"),
    ("went hiking", "go hiking"),
    ("visited the science museum", "visit the science museum"),
)
SMALL_TALK = (
    (
        "Morning! Slept badly, the neighbours had a party until {h} o'clock.",
        "That sounds rough, maybe an early night tonight, {first}'s party can wait?",
    ),
    (
        "Can you remind me to call {first} about the {topic} later?",
        "Sure, I'll remind you about {first} and the {topic} at {h}:30.",
    ),
    (
        "The weather in {city} is {weather} again today.",
        "{weather} days in {city} are good for staying in with a book.",
    ),
    (
        "Work was hectic, {n} emails before lunch about the {topic}.",
        "{n} emails is a lot, block an hour for the {topic} tomorrow.",
    ),
    (
        "{first} {last} called me about the {topic} again.",
        "Did {first} say what changed about the {topic}?",
    ),
    (
        "Let's plan something for the weekend, maybe a trip to {city}?",
        "{city} is about {n} hours away, that could work.",
    ),
)
TOPICS = phrases(
    "tax return, budget, renovation, garden, insurance, team offsite, school fees, gym plan, "
    "new phone, kitchen leak, holiday photos, vaccination, dentist bill, bike repair"
)
WEATHER = ["rainy", "foggy", "windy", "sunny", "freezing", "humid", "stormy"]


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


# ---------------------------------------------------------------------------------------------
# Measuring: each system is driven through its own MCP tools by the SDK's client.


@dataclass
class Result:
    acknowledged_s: float
    searchable_s: float
    latencies_ms: list[float]
    hits: list[tuple[Kind, bool]]
    rss_peak_mb: float = 0.0
    rss_end_mb: float = 0.0


@dataclass(frozen=True)
class NotRun:
    reason: str


Search = Callable[[str], Awaitable[list[str]]]  # a question -> the texts returned, best first


def _processes() -> dict[int, tuple[int, str]]:
    """Every process of the machine: pid -> (parent pid, command line), from /proc."""
    table_: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        table_[int(entry.name)] = (parent, cmdline)
    return table_


def _rss(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class RssWatch:
    """Resident memory (VmRSS) of our descendant processes whose command line holds
    ``marker``, with their own descendants, sampled every 0.2 s in a thread."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> int:
        procs = _processes()
        children: dict[int, list[int]] = {}
        for pid, (parent, _) in procs.items():
            children.setdefault(parent, []).append(pid)
        me, ours = os.getpid(), set()
        pending = [(child, False) for child in children.get(me, [])]
        while pending:  # walk our process tree; a marked process brings its descendants
            pid, inside = pending.pop()
            inside = inside or self.marker in procs[pid][1]
            if inside:
                ours.add(pid)
            pending.extend((child, inside) for child in children.get(pid, []))
        total = sum(_rss(pid) for pid in ours)
        self.peak = max(self.peak, total)
        return total

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.sample()


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def ask_all(search: Search, corpus: Corpus, queries: list[Query]) -> Result:
    """Every question once (after 10 unmeasured ones): latency and whether gold is in the top 10."""
    ids = {m.text: i for i, m in enumerate(corpus.memories)}
    for query in queries[:10]:
        await search(query.text)
    latencies, hits = [], []
    for query in queries:
        start = time.perf_counter()
        texts = await search(query.text)
        latencies.append((time.perf_counter() - start) * 1000)
        found = {ids.get(text, -1) for text in texts[:10]}
        hits.append((query.kind, bool(found & query.gold)))
    return Result(0.0, 0.0, latencies, hits)


def payload(result: Any) -> Any:
    """A tool result's structured content, else its first text block read as JSON."""
    if result.is_error:
        raise RuntimeError(f"tool error: {result.content[0].text if result.content else ''}")
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


# -- ours ---------------------------------------------------------------------------------------


async def drive_ours(url: str, key: str, corpus: Corpus, queries: list[Query]) -> Result:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url + "/mcp", http_client=http)) as client,
    ):
        start = time.perf_counter()
        for i, memory in enumerate(corpus.memories):
            payload(
                await client.call_tool(
                    "store_memory",
                    {"content": memory.text, "date": memory.date, "role": memory.role},
                )
            )
            if i % 2000 == 1999:
                progress(f"ours: {i + 1} stored")
        acknowledged = time.perf_counter() - start
        while (await http.get(url + "/v1/memory/stats")).json()["pending_embeddings"]:
            await anyio.sleep(0.2)  # searchable by meaning once every vector is written
        searchable = time.perf_counter() - start

        async def search(query: str) -> list[str]:
            found = payload(await client.call_tool("search_memories", {"query": query}))
            return [row["content"] for row in found["memories"]]

        result = await ask_all(search, corpus, queries)
    result.acknowledged_s, result.searchable_s = acknowledged, searchable
    return result


def run_ours(corpus: Corpus, queries: list[Query]) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        created = subprocess.run(
            [sys.executable, "-m", "mcp_memoryrouter", "keys", "create", "--json"],
            env={**os.environ, "MEMORYROUTER_DATA_DIR": tmp},
            capture_output=True,
            check=True,
            text=True,
        )
        key = json.loads(created.stdout)["key"]
        with server(Path(tmp)) as url, RssWatch("mcp_memoryrouter") as rss:
            result = anyio.run(drive_ours, url, key, corpus, queries)
            result.rss_end_mb = rss.sample() / 2**20
            result.rss_peak_mb = rss.peak / 2**20
    return result


# -- @modelcontextprotocol/server-memory ----------------------------------------------------------


def install_server_memory() -> Path | NotRun:
    prefix = SCRATCH / "npm"
    entry = prefix / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist"
    entry = entry / "index.js"
    if entry.exists():
        return entry
    npm = shutil.which("npm")
    if npm is None:
        return NotRun("npm is not on PATH")
    progress(f"installing {SERVER_MEMORY} into {prefix.relative_to(ROOT)} (npm install)")
    subprocess.run(
        [
            npm,
            "install",
            "--no-audit",
            "--no-fund",
            "--silent",
            "--prefix",
            str(prefix),
            SERVER_MEMORY,
        ],
        check=True,
    )
    return entry


def dated(memory: Memory) -> str:
    """How a memory is written where the store has no date field: the day in front."""
    return f"[{memory.date[:10]}] {memory.text}"


async def drive_server_memory(
    entry: Path, store: Path, corpus: Corpus, queries: list[Query], rss: RssWatch
) -> Result:
    params = StdioServerParameters(
        command=shutil.which("node") or "node",
        args=[str(entry)],
        env={"MEMORY_FILE_PATH": str(store)},
    )
    with open(os.devnull, "w") as quiet:
        async with Client(stdio_client(params, errlog=quiet)) as client:
            conversations: dict[int, list[Memory]] = {}
            for memory in corpus.memories:
                conversations.setdefault(memory.conversation, []).append(memory)
            start = time.perf_counter()
            for number_, memories in conversations.items():
                entity = {
                    "name": f"conversation {number_:04d}",
                    "entityType": "conversation",
                    "observations": [dated(m) for m in memories],
                }
                payload(await client.call_tool("create_entities", {"entities": [entity]}))
                if number_ % 100 == 99:
                    progress(f"server-memory: {number_ + 1} conversations stored")
            acknowledged = time.perf_counter() - start  # written to its file before it answers

            async def search(query: str) -> list[str]:
                # search_nodes answers whole entities (every observation of each), unranked;
                # the memories it found are the observations holding the query.
                graph = payload(await client.call_tool("search_nodes", {"query": query}))
                needle = query.lower()
                return [
                    observation.split("] ", 1)[-1]
                    for entity in graph["entities"]
                    for observation in entity["observations"]
                    if needle in observation.lower()
                ]

            result = await ask_all(search, corpus, queries)
            result.rss_end_mb = rss.sample() / 2**20  # while it still runs
    result.acknowledged_s = result.searchable_s = acknowledged
    return result


def run_server_memory(corpus: Corpus, queries: list[Query]) -> Result | NotRun:
    entry = install_server_memory()
    if isinstance(entry, NotRun):
        return entry
    with tempfile.TemporaryDirectory() as tmp, RssWatch("server-memory") as rss:
        store = Path(tmp) / "memory.jsonl"
        result = anyio.run(drive_server_memory, entry, store, corpus, queries, rss)
        result.rss_peak_mb = rss.peak / 2**20
    return result


# -- basic-memory ---------------------------------------------------------------------------------


def python_312() -> str | None:
    """A Python >= 3.12 that runs: PEERS_PYTHON, then python3.14-3.12 on PATH, then pyenv's."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [
        os.environ.get("PEERS_PYTHON", ""),
        *(shutil.which(f"python3.{minor}") or "" for minor in (14, 13, 12)),
        *(str(p) for p in sorted(pyenv.glob("3.1[2-4]*/bin/python3"), reverse=True)),
    ]
    for candidate in filter(None, candidates):
        check = [candidate, "-c", "import sys; sys.exit(sys.version_info < (3, 12))"]
        if subprocess.run(check, capture_output=True).returncode == 0:
            return candidate
    return None


def install_basic_memory() -> Path | NotRun:
    venv = SCRATCH / "basic-memory"
    exe = venv / "bin" / "basic-memory"
    if exe.exists():
        return exe
    python = python_312()
    if python is None:
        return NotRun(
            f"{BASIC_MEMORY} requires Python >= 3.12 and none was found (PEERS_PYTHON, "
            "python3.12-3.14 on PATH, pyenv's versions); it cannot run on this Python "
            f"{sys.version_info.major}.{sys.version_info.minor}: dozens of its modules use "
            "3.12-only syntax (PEP 695 'type' aliases and generic functions), which no runtime "
            "shim can supply"
        )
    progress(f"installing {BASIC_MEMORY} into {venv.relative_to(ROOT)} ({python} -m venv, pip)")
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", BASIC_MEMORY], check=True)
    return exe


def title_of(memory: Memory) -> str:
    """A note's title: opaque and unique, so it names one memory and matches no question."""
    return "m" + hashlib.sha1(memory.text.encode()).hexdigest()[:12]


async def drive_basic_memory(
    exe: Path, home: Path, corpus: Corpus, queries: list[Query], rss: RssWatch
) -> Result:
    params = StdioServerParameters(
        command=str(exe),
        args=["mcp"],
        env={"BASIC_MEMORY_HOME": str(home / "notes"), "BASIC_MEMORY_CONFIG_DIR": str(home)},
    )
    by_title = {title_of(m): m.text for m in corpus.memories}
    with open(os.devnull, "w") as quiet:
        async with Client(stdio_client(params, errlog=quiet)) as client:

            async def search(query: str) -> list[str]:
                found = payload(
                    await client.call_tool(
                        "search_notes",
                        # Keyword search: its hybrid mode needs SQLite extension loading
                        # and a model download, and asking for it where either is missing
                        # only adds a failed attempt before the same keyword search.
                        {
                            "query": query,
                            "page_size": 10,
                            "search_type": "text",
                            "output_format": "json",
                        },
                    )
                )
                found = found.get("result", found)  # FastMCP wraps a returned dict
                return [by_title.get(hit.get("title", ""), "") for hit in found["results"]]

            start = time.perf_counter()
            for i, memory in enumerate(corpus.memories):
                note = {
                    "title": title_of(memory),
                    "content": dated(memory),
                    "directory": "memories",
                }
                payload(await client.call_tool("write_note", note))
                if i % 2000 == 1999:
                    progress(f"basic-memory: {i + 1} written")
            acknowledged = time.perf_counter() - start
            last = corpus.memories[-1].text
            with anyio.fail_after(900):  # it indexes in the background: wait until it finds
                while last not in await search(title_of(corpus.memories[-1])):
                    await anyio.sleep(0.2)
            searchable = time.perf_counter() - start
            result = await ask_all(search, corpus, queries)
            result.rss_end_mb = rss.sample() / 2**20  # while it still runs
    result.acknowledged_s, result.searchable_s = acknowledged, searchable
    return result


def run_basic_memory(corpus: Corpus, queries: list[Query]) -> Result | NotRun:
    exe = install_basic_memory()
    if isinstance(exe, NotRun):
        return exe
    with tempfile.TemporaryDirectory() as tmp, RssWatch("basic-memory") as rss:
        result = anyio.run(drive_basic_memory, exe, Path(tmp), corpus, queries, rss)
        result.rss_peak_mb = rss.peak / 2**20
    return result


# ---------------------------------------------------------------------------------------------
# Report


def recall(result: Result, kind: Kind | None = None) -> float:
    hits = [hit for k, hit in result.hits if kind is None or k == kind]
    return 100 * sum(hits) / len(hits) if hits else float("nan")


def report(results: dict[str, Result | NotRun], queries: list[Query]) -> None:
    names = list(results)
    ours = results[names[0]]
    assert isinstance(ours, Result)
    kinds: tuple[Kind, ...] = ("keyword", "paraphrase", "temporal")
    counts = {kind: sum(q.kind == kind for q in queries) for kind in kinds}
    rows: list[tuple[str, Callable[[Result], str]]] = [
        ("ingest acknowledged s", lambda r: f"{r.acknowledged_s:.1f}"),
        ("ingest searchable s", lambda r: f"{r.searchable_s:.1f}"),
        ("search p50 ms", lambda r: f"{p50(r.latencies_ms):.2f}"),
        ("search p95 ms", lambda r: f"{p95(r.latencies_ms):.2f}"),
        (f"recall@10 % (n={len(queries)})", lambda r: f"{recall(r):.1f}"),
        *(
            (f"  {kind} (n={n})", lambda r, k=kind: f"{recall(r, k):.1f}")
            for kind, n in counts.items()
        ),
        ("RSS peak MB", lambda r: f"{r.rss_peak_mb:.0f}"),
        ("RSS at end MB", lambda r: f"{r.rss_end_mb:.0f}"),
        ("p50 ratio peer/ours", lambda r: f"{p50(r.latencies_ms) / p50(ours.latencies_ms):.2f}"),
        ("searchable ratio peer/ours", lambda r: f"{r.searchable_s / ours.searchable_s:.2f}"),
    ]
    body = [
        [label, *(fmt(r) if isinstance(r, Result) else "not run" for r in results.values())]
        for label, fmt in rows
    ]
    print(table(["", *names], body))
    for name, result in list(results.items())[1:]:
        if isinstance(result, NotRun):
            print(f"{name}: not run: {result.reason}")
            continue
        speed = p50(result.latencies_ms) / p50(ours.latencies_ms)
        faster = f"{speed:.1f}x faster" if speed >= 1 else f"{1 / speed:.1f}x SLOWER"
        met = speed >= 10 and recall(ours) >= recall(result)
        print(
            f"vs {name}: ours searches {faster} at p50 (goal >= 10x faster), recall@10 "
            f"{recall(ours):.1f} vs {recall(result):.1f} (goal: equal or better): "
            + ("met" if met else "NOT met")
        )


def code_version() -> str:
    """The commit the server ran from, flagged when its package had uncommitted changes."""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "mcp_memoryrouter"], capture_output=True, text=True
    )
    return head.stdout.strip() + (" + uncommitted changes" if dirty.stdout.strip() else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000, help="memories (default 10000)")
    parser.add_argument("--queries", type=int, default=200, help="questions (default 200)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--only",
        nargs="*",
        choices=["server-memory", "basic-memory"],
        default=None,
        help="peers to run (default: both)",
    )
    args = parser.parse_args()
    version = code_version()  # before the server starts and loads the package
    corpus = build_corpus(args.size, args.seed)
    queries = build_queries(corpus, args.queries, args.seed)
    progress(f"corpus: {len(corpus.memories)} memories, {len(queries)} questions")
    peers: dict[str, Callable[[Corpus, list[Query]], Result | NotRun]] = {
        "server-memory": run_server_memory,
        "basic-memory": run_basic_memory,
    }
    results: dict[str, Result | NotRun] = {}
    progress("mcp-memoryrouter")
    results["mcp-memoryrouter"] = run_ours(corpus, queries)
    for name, run in peers.items():
        if args.only is not None and name not in args.only:
            results[name] = NotRun("left out by --only")
            continue
        progress(name)
        try:
            results[name] = run(corpus, queries)
        except Exception as exc:  # one peer failing must not lose the others' figures
            results[name] = NotRun(f"failed: {type(exc).__name__}: {exc}")
    print(
        f"{len(corpus.memories)} memories, {len(queries)} questions, seed {args.seed}, "
        f"server code {version}"
    )
    report(results, queries)


if __name__ == "__main__":
    main()
