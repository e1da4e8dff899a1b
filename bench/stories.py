"""Does a page of hits cover the whole story? Generated long histories, scored by conversation.

    python bench/stories.py [--histories 4] [--conversations 50] [--seed 7] [--embeddings local]
        [--as-of] [--wording paraphrase|plain] [--consolidate none,unmarked,marked]
        [--rankers fusion,learned]

Each history is one vault: ``--conversations`` dated conversations (sessions) of user and
assistant turns over a year, ingested through the HTTP API with their session ids, most of it
small talk. Facts are planted in it three ways, and each gets a question whose wording shares
few words with its evidence (``--wording plain``: one that uses its evidence's words, so the
lexical baselines get a fair chance):

- **spans**: one kind of fact told in 2-4 different conversations ("which animals do I live
  with?" after adopting a beagle in one and a cat in another);
- **update**: a fact told, then changed in a later conversation ("where do I live now?" after
  moving twice); both conversations are evidence, and the newer must not rank under the older;
- **time**: the same kind of event in several months, asked of one ("what did I cook last
  month?", with ``as_of`` the moment the question is asked).

Scored per question over the top k hits (k = 5, 10): ``all@k``, every evidence conversation
among them; ``distinct@k``, how many distinct conversations they come from; and for updates,
``newer@k``, the newest evidence ranked above the older. Beside the server, in the same run,
two plain BM25 baselines over the same texts: over turns, and over whole conversations.

``--consolidate``: each listed way makes a vault of its own from the same history, so the
rows compare in one run. ``none``: raw memories only (today's default). ``unmarked`` and
``marked``: consolidated through contract 2 in batches of 1,000 tokens, oldest first, by a
scripted model that writes one reflection per planted fact it reads (citing its line) and
one for the rest of the batch; ``marked`` also names, in ``replaces``, the label of a shown
reflection that holds the fact an update changes (as a model following the contract does),
``unmarked`` never does. For updates, ``current@k``: the first of the top k rows that names
either value names the current one.
``--rankers fusion,learned``: the vaults are built once, then asked by one server per ranker
in turn (``MEMORYROUTER_RANKER``), each a row of its own.
Kept out of the default test suite: a benchmark, run on purpose.
"""

from __future__ import annotations

import argparse
import math
import random
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, new_vault, server, table

START = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
KS = (5, 10)
CURRENT = tuple(f"current@{k}" for k in KS)

SMALL_TALK = [
    ("user", "Morning! Slept badly again, the neighbours had a party until two."),
    ("assistant", "Sorry to hear that. A short walk before work can help you feel awake."),
    ("user", "Can you suggest a quick lunch I can make in ten minutes?"),
    ("assistant", "A wrap with hummus, spinach and leftover chicken takes about ten minutes."),
    ("user", "Remind me how to convert Fahrenheit to Celsius?"),
    ("assistant", "Subtract 32, then multiply by five ninths."),
    ("user", "I have a meeting at three and I haven't prepared the slides yet."),
    (
        "assistant",
        "Start with the three points you want people to remember, then build around them.",
    ),
    ("user", "What's a good way to stop procrastinating on emails?"),
    ("assistant", "Try answering anything that takes under two minutes right away."),
    ("user", "The weather is awful today, grey and windy."),
    ("assistant", "A good day for indoor plans, then. A film or a book?"),
    ("user", "Any tips for keeping houseplants alive in winter?"),
    ("assistant", "Water less often, keep them away from radiators, and give them light."),
    ("user", "I keep forgetting to drink water during the day."),
    ("assistant", "A bottle on your desk and a reminder every two hours usually works."),
    ("user", "Could you explain what a Roth account is in simple terms?"),
    ("assistant", "You pay tax on the money now, and withdrawals in retirement are tax free."),
    ("user", "I'm thinking about reorganising my bookshelf by colour."),
    ("assistant", "It looks lovely, though finding a specific book gets harder."),
]

# (kind, evidence templates, values, questions): each question shares few words with them
SPANS = [
    (
        "pets",
        [
            "We finally adopted {v} from the shelter this weekend!",
            "Guess what, there's a new member of the household: {v}.",
            "I brought home {v} yesterday, the kids are thrilled.",
        ],
        ["a beagle called Rex", "a tabby kitten named Miso", "two budgies", "a rescue greyhound"],
        ["Which animals live with me?", "What creatures share my home these days?"],
    ),
    (
        "languages",
        [
            "I signed up for evening classes in {v}.",
            "Started practising {v} with an app on the train every morning.",
            "My tutor says my {v} pronunciation is improving.",
        ],
        ["Portuguese", "Japanese", "Swedish", "Greek"],
        ["Which tongues am I trying to pick up?", "What am I studying to speak?"],
    ),
    (
        "injuries",
        [
            "Ugh, I {v} and the doctor told me to rest.",
            "Bad news from the clinic: I {v}.",
        ],
        ["sprained my ankle playing football", "pulled a muscle in my back", "broke a finger"],
        ["What health setbacks have I had?", "Remind me of the times I got hurt."],
    ),
]
# One evidence conversation of a spans fact dwells on it: more turns on the same subject and a
# long answer stored as several units, the way one conversation crowds a page.
DWELL = {
    "pets": (
        [
            "{v} chewed through another charging cable today.",
            "Took {v} to the vet for a check-up, all fine.",
            "Should I get a bigger bed and more toys for {v}?",
        ],
        "Looking after a new animal takes patience. Keep a routine for feeding, walks and "
        "sleep, introduce other pets slowly, book a vet visit in the first weeks, and make a "
        "quiet corner where it can retreat. ",
    ),
    "languages": (
        [
            "My {v} homework took two hours tonight.",
            "Watched a film in {v} with subtitles, understood about half.",
            "Which {v} grammar book would you recommend?",
        ],
        "Learning to speak a new language goes faster with short daily practice, listening "
        "to native speakers, speaking out loud from the first week, and reviewing vocabulary "
        "with spaced repetition rather than long weekly sessions. ",
    ),
    "injuries": (
        [
            "Still limping around after I {v}.",
            "The physio gave me exercises because I {v}.",
            "Can't sleep well since I {v}.",
        ],
        "Recovering from an injury means rest at first, then gentle movement, ice for swelling, "
        "following the physiotherapist's exercises, and not rushing back to sport before the "
        "pain is gone. ",
    ),
}

UPDATES = [
    (
        "home",
        "I just moved to {v}, the flat is small but bright.",
        "Big change: we relocated to {v} last week.",
        ["Lyon", "Lisbon", "Leeds", "Valencia", "Porto"],
        ["Which city am I based in at the moment?", "Where's my place these days?"],
    ),
    (
        "job",
        "I accepted an offer as {v}!",
        "New role starting Monday: {v}.",
        [
            "a data analyst at a bank",
            "a product manager at a startup",
            "a teacher at a primary school",
        ],
        ["What do I do for a living now?", "What's my current occupation?"],
    ),
    (
        "car",
        "We bought {v}, it drives really nicely.",
        "Sold the old one and got {v} instead.",
        ["a blue hatchback", "a second-hand estate", "an electric compact"],
        ["What vehicle do I own at present?", "Which car is in my driveway now?"],
    ),
]
# ``--wording plain``: one question per kind that uses the words its evidence was told in, so
# the lexical baselines get a fair chance (the default questions are paraphrases).
PLAIN = {
    "pets": "Which pets have we adopted, brought home, or added to the household?",
    "languages": "Which languages am I practising, taking classes in, or working on "
    "pronunciation for?",
    "injuries": "What did I hurt, and what did the doctor or the clinic tell me?",
    "home": "Which city have I moved or relocated to?",
    "job": "Which offer did I accept, which new role am I starting?",
    "car": "Which car have we bought, or got instead of the old one?",
    "cooking": "What dish did I make from scratch {when}?",
    "concerts": "Who did I see play live {when}?",
}
TIMED = [
    (
        "cooking",
        "Tonight I tried making {v} from scratch, turned out great.",
        ["mushroom risotto", "lamb tagine", "pad thai", "shakshuka", "beef stew", "gnocchi"],
        "What dish did I prepare {when}?",
    ),
    (
        "concerts",
        "Went to see {v} play live, what a show.",
        ["a jazz trio", "an orchestra doing Mahler", "a punk band", "a folk singer"],
        "Which performance did I attend {when}?",
    ),
]


@dataclass
class Turn:
    role: str
    text: str
    date: datetime


@dataclass
class Conversation:
    session: str
    start: datetime
    turns: list[Turn] = field(default_factory=list)


@dataclass
class Question:
    kind: str  # spans | update | time
    text: str
    evidence: list[str]  # session ids, oldest first
    as_of: datetime
    values: tuple[str, str] | None = None  # an update's (old, current) value


@dataclass(frozen=True)
class Planted:
    """A planted line as the scripted model reads it: its kind, its value, and for an
    update's later line the value it replaces."""

    kind: str
    value: str
    replaces: str | None = None


PLANTED: dict[str, Planted] = {}  # every planted line of the histories generated so far


def _planted(text: str, kind: str, value: str, replaces: str | None = None) -> str:
    """``text``, kept in :data:`PLANTED` for the scripted model to read."""
    PLANTED[text] = Planted(kind, value, replaces)
    return text


def _month_words(as_of: datetime, when: datetime) -> str:
    months = (as_of.year - when.year) * 12 + as_of.month - when.month
    if months == 1:
        return "last month"
    return f"in {when.strftime('%B')}"


def generate(
    rng: random.Random, conversations: int, plain: bool = False
) -> tuple[list[Conversation], list[Question]]:
    span_days = 360
    convs: list[Conversation] = []
    for n in range(conversations):
        start = START + timedelta(days=span_days * n / conversations, hours=rng.randint(0, 10))
        conv = Conversation(f"conv-{n:03d}", start)
        picks = rng.sample(SMALL_TALK, 8)
        for i, (role, text) in enumerate(picks):
            conv.turns.append(Turn(role, text, start + timedelta(minutes=2 * i)))
        convs.append(conv)

    def plant(conv: Conversation, text: str) -> None:
        at = rng.randint(1, len(conv.turns) - 1)
        when = conv.turns[at - 1].date + timedelta(minutes=1)
        conv.turns.insert(at, Turn("user", text, when))
        reply = rng.choice(
            ["That's great news!", "Oh no, take care.", "Interesting, tell me more."]
        )
        conv.turns.insert(at + 1, Turn("assistant", reply, when + timedelta(seconds=30)))

    questions: list[Question] = []
    end = convs[-1].start + timedelta(days=2)
    for kind, templates, values, asks in SPANS:
        chosen = sorted(rng.sample(range(conversations), rng.randint(2, min(4, len(values)))))
        told = rng.sample(values, len(chosen))
        for slot, value in zip(chosen, told, strict=True):
            plant(convs[slot], _planted(rng.choice(templates).format(v=value), kind, value))
        dwell = rng.choice(chosen)
        follow_ups, long_answer = DWELL[kind]
        for line in follow_ups:
            plant(convs[dwell], line.format(v=told[chosen.index(dwell)]))
        conv = convs[dwell]
        conv.turns.append(
            Turn("assistant", long_answer * 12, conv.turns[-1].date + timedelta(minutes=1))
        )
        asked = rng.choice(asks)
        questions.append(
            Question(
                "spans", PLAIN[kind] if plain else asked, [convs[s].session for s in chosen], end
            )
        )
    for kind, first, later, values, asks in UPDATES:
        old, new = sorted(rng.sample(range(conversations), 2))
        before, after = rng.sample(values, 2)
        plant(convs[old], _planted(first.format(v=before), kind, before))
        plant(convs[new], _planted(later.format(v=after), kind, after, before))
        asked = rng.choice(asks)
        told_in = [convs[old].session, convs[new].session]
        wording = PLAIN[kind] if plain else asked
        questions.append(Question("update", wording, told_in, end, (before, after)))
    for kind, template, values, ask in TIMED:
        chosen = sorted(rng.sample(range(conversations), 4))
        for slot, value in zip(chosen, rng.sample(values, 4), strict=True):
            plant(convs[slot], _planted(template.format(v=value), kind, value))
        for slot in chosen[1:]:
            asked_at = convs[slot].start + timedelta(days=rng.randint(35, 55))
            words = _month_words(asked_at, convs[slot].start)
            others = [
                s
                for s in chosen
                if s != slot
                and (convs[s].start.year, convs[s].start.month)
                == (convs[slot].start.year, convs[slot].start.month)
            ]
            if others:
                continue  # two events in the asked month: not one answer
            wording = PLAIN[kind] if plain else ask
            questions.append(
                Question("time", wording.format(when=words), [convs[slot].session], asked_at)
            )
    return convs, questions


# --- the two BM25 baselines --------------------------------------------------------------

_WORD = re.compile(r"\w+")


def _terms(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25:
    def __init__(self, docs: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(_terms(d)) for d in docs]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = statistics.mean(self.lengths) if self.lengths else 1.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.k1, self.b = k1, b

    def rank(self, query: str) -> list[int]:
        terms = set(_terms(query))
        scores = []
        for i, doc in enumerate(self.docs):
            s = 0.0
            for t in terms:
                f = doc.get(t, 0)
                if f:
                    norm = f + self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
                    s += self.idf.get(t, 0.0) * f * (self.k1 + 1) / norm
            scores.append(s)
        return sorted(range(len(self.docs)), key=lambda i: -scores[i])


# --- scoring -------------------------------------------------------------------------------


def score(
    kind: str, evidence: list[str], ranked: list[str], current: list[float] | None = None
) -> dict[str, float]:
    """``current``: for an update, each k's current@k (see the module's docstring)."""
    out: dict[str, float] = {} if current is None else dict(zip(CURRENT, current, strict=True))
    for k in KS:
        top = ranked[:k]
        out[f"all@{k}"] = 100.0 * all(e in top for e in evidence)
        out[f"distinct@{k}"] = float(len(set(top)))
        if kind == "update":
            newest, oldest = evidence[-1], evidence[0]
            rank = {s: i for i, s in reversed(list(enumerate(top)))}
            out[f"newer@{k}"] = 100.0 * (
                newest in rank and (oldest not in rank or rank[newest] < rank[oldest])
            )
    return out


def run(args: argparse.Namespace) -> dict[str, dict[str, list[dict[str, float]]]]:
    results: dict[str, dict[str, list[dict[str, float]]]] = defaultdict(lambda: defaultdict(list))
    env = {"MEMORYROUTER_EMBEDDINGS": args.embeddings}
    modes = args.consolidate.split(",")
    rankers = args.rankers.split(",") if args.rankers else [None]
    with tempfile.TemporaryDirectory() as tmp:
        built: list[tuple[str, str, list[Question], dict[tuple[str, str], str]]] = []
        with server(Path(tmp), env) as base:
            for h in range(args.histories):
                rng = random.Random(args.seed * 1000 + h)
                convs, questions = generate(rng, args.conversations, args.wording == "plain")
                where = {(t.text, _iso(t.date)): c.session for c in convs for t in c.turns}
                for mode in modes:
                    vault_key = new_vault(Path(tmp), f"history-{h}-{mode}")
                    with httpx2.Client(
                        base_url=base, headers={"Authorization": f"Bearer {vault_key}"}, timeout=120
                    ) as http:
                        _ingest(http, convs)
                        if mode != "none":
                            consolidate(http, marked=mode == "marked")
                        _wait_for_vectors(http)
                    system = "server" if mode == "none" else f"server, reflections {mode}"
                    built.append((system, vault_key, questions, where))
                turns = [(c.session, t.text) for c in convs for t in c.turns]
                _baselines(results, convs, questions, turns)
        for ranker in rankers:  # each ranker's server over the same vaults, in turn
            ranked_env = env if ranker is None else {**env, "MEMORYROUTER_RANKER": ranker}
            with server(Path(tmp), ranked_env) as base:
                for system, vault_key, questions, where in built:
                    named = system if ranker is None else f"{system}, {ranker}"
                    with httpx2.Client(
                        base_url=base, headers={"Authorization": f"Bearer {vault_key}"}, timeout=120
                    ) as http:
                        _ask(http, args.as_of, questions, where, results[named])
    return results


def _ask(
    http: httpx2.Client,
    as_of: bool,
    questions: list[Question],
    where: dict[tuple[str, str], str],
    into: dict[str, list[dict[str, float]]],
) -> None:
    for q in questions:
        body: dict[str, object] = {"query": q.text, "limit": max(KS)}
        if as_of:
            body["as_of"] = q.as_of.isoformat()
        found = http.post("/v1/memory/search", json=body).json()["memories"]
        ranked = [_session_of(where, row) for row in found]
        current = None if q.values is None else _current(q.values, found)
        into[q.kind].append(score(q.kind, q.evidence, ranked, current))


def _baselines(
    results: dict[str, dict[str, list[dict[str, float]]]],
    convs: list[Conversation],
    questions: list[Question],
    turns: list[tuple[str, str]],
) -> None:
    by_turn = BM25([text for _, text in turns])
    by_conv = BM25([" ".join(t.text for t in c.turns) for c in convs])
    for q in questions:
        turn_ranked = [turns[i][0] for i in by_turn.rank(q.text)[: max(KS)]]
        results["BM25 over turns"][q.kind].append(score(q.kind, q.evidence, turn_ranked))
        conv_ranked = [convs[i].session for i in by_conv.rank(q.text)[: max(KS)]]
        results["BM25 over conversations"][q.kind].append(score(q.kind, q.evidence, conv_ranked))


def _ingest(http: httpx2.Client, convs: list[Conversation]) -> None:
    for conv in convs:
        messages = [
            {"role": t.role, "content": t.text, "date": t.date.isoformat()} for t in conv.turns
        ]
        stored = {"messages": messages, "session_id": conv.session}
        assert http.post("/v1/memory/ingest", json=stored).status_code == 202


def _current(values: tuple[str, str], found: list[dict[str, object]]) -> list[float]:
    """current@k for each k: the first of the top k rows naming either value names the new."""
    old, new = (v.lower() for v in values)
    named = [
        new in text if new in text or old in text else None
        for text in (str(row["content"]).lower() for row in found)
    ]
    out = []
    for k in KS:
        first = next((n for n in named[:k] if n is not None), False)
        out.append(100.0 * first)
    return out


_RELATED = re.compile(r"^\[(R[0-9]+)\] [^:]*: (.*)$")


def consolidate(http: httpx2.Client, *, marked: bool) -> None:
    """Consolidate the vault through contract 2, oldest first, in batches of 1,000 tokens,
    with the scripted model (:func:`scripted`)."""
    while True:
        checkout = {"tier": 1, "max_tokens": 1_000, "contract": 2}
        batch = http.post("/v1/memory/consolidate/checkout", json=checkout).json()
        if batch["batch_id"] is None:
            return
        lines = batch["reflection_contract"]["instructions"].splitlines()
        shown = {m.group(1): m.group(2) for m in map(_RELATED.match, lines) if m}
        entries = scripted(batch["memories"], shown, marked)
        done = http.post(
            "/v1/memory/consolidate/commit",
            json={"batch_id": batch["batch_id"], "entries": entries},
        )
        assert done.status_code == 200, done.text


def scripted(
    memories: list[dict[str, object]], shown: dict[str, str], marked: bool
) -> list[dict[str, object]]:
    """A model following contract 2: one entry per planted line (citing it), one for the rest
    of the batch; ``marked``: an update names the shown reflection holding its old value, or,
    told in the same batch, the line that said it (whose own entry it then leaves out)."""
    entries: list[dict[str, object]] = []
    rest: list[dict[str, object]] = []
    facts = {
        str(m["text"]): (m, PLANTED[str(m["text"])]) for m in memories if str(m["text"]) in PLANTED
    }
    changed = {
        (fact.kind, fact.replaces): memory["line"]
        for memory, fact in facts.values()
        if fact.replaces is not None
    }
    told = {(fact.kind, fact.value): memory["line"] for memory, fact in facts.values()}
    for memory in memories:
        if str(memory["text"]) not in facts:
            rest.append(memory)
            continue
        fact = facts[str(memory["text"])][1]
        if marked and (fact.kind, fact.value) in changed:
            continue  # changed later in this batch: only what is true now is written
        entry: dict[str, object] = {
            "text": f"On {str(memory['date'])[:10]} the user said: {memory['text']}",
            "importance": 7,
            "cites": [memory["line"]],
        }
        if marked and fact.replaces is not None:
            earlier = told.get((fact.kind, fact.replaces))
            old = fact.replaces.lower()
            labels = [label for label, text in shown.items() if old in text.lower()]
            if earlier is not None:
                labels.append(f"L{earlier}")
            if labels:
                entry["replaces"] = labels
        entries.append(entry)
    if rest:
        start, end = str(rest[0]["date"])[:10], str(rest[-1]["date"])[:10]
        entries.append(
            {
                "text": f"Between {start} and {end} the user and the assistant also chatted "
                f"about everyday things ({len(rest)} lines of routine conversation).",
                "importance": 2,
                "cites": [m["line"] for m in rest[:10]],
            }
        )
    return entries


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (
        f"{moment.microsecond // 1000:03d}Z"
    )


def _session_of(where: dict[tuple[str, str], str], row: dict[str, object]) -> str:
    """A hit's conversation, by its text and date (a reflection's: its tier)."""
    if row.get("tier") != 1:
        return f"tier {row.get('tier')}"
    return where.get((str(row["content"]), str(row.get("date"))), "?")


def _wait_for_vectors(http: httpx2.Client) -> None:
    while http.get("/v1/memory/stats").json()["pending_embeddings"]:
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", type=int, default=4)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--embeddings", default="local")
    parser.add_argument("--as-of", action="store_true", help="send each question's as_of")
    parser.add_argument(
        "--rankers",
        help="MEMORYROUTER_RANKER of each server, in turn over the same vaults: fusion,learned",
    )
    parser.add_argument(
        "--consolidate",
        default="none",
        help="comma-separated: none (raw only), unmarked, marked (see above)",
    )
    parser.add_argument(
        "--wording",
        default="paraphrase",
        choices=["paraphrase", "plain"],
        help="questions that share few words with their evidence, or use its words",
    )
    args = parser.parse_args()
    results = run(args)
    kinds = ["spans", "update", "time"]
    metrics = [f"all@{k}" for k in KS] + [f"distinct@{k}" for k in KS] + ["newer@5", *CURRENT]
    rows = []
    for system, by_kind in results.items():
        for kind in [*kinds, "all"]:
            scored = [s for k in kinds for s in by_kind[k]] if kind == "all" else by_kind[kind]
            cells = []
            for m in metrics:
                values = [s[m] for s in scored if m in s]
                cells.append(f"{statistics.mean(values):.1f}" if values else "")
            rows.append([system, kind, str(len(scored)), *cells])
    print(
        f"code {code_version()}; {args.histories} histories x {args.conversations} "
        f"conversations; {args.wording} questions{', as_of sent' if args.as_of else ''}"
    )
    print(table(["system", "questions", "n", *metrics], rows))


if __name__ == "__main__":
    main()
