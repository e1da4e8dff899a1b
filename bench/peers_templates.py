"""The words and sentence templates the peers benchmark's corpus is written from.

Each template is one kind of fact: the slots it draws, the slots that key it (what a question
names), the user's statement, the assistant's answer, and two questions (one in the statement's
own words, one in other words). ``bench/peers_corpus.py`` assembles them into conversations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from random import Random


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
