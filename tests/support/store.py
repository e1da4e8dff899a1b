"""Helpers for the store and search tests: the records of a context frame, debt recounts, the
lexical index's vaults, the reflection loop over HTTP."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import httpx2
from starlette.testclient import TestClient

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.app import build_service, create_vault_app
from mcp_memoryrouter.vault.rules.debt import debt_block
from mcp_memoryrouter.vault.rules.domain import (
    Counters,
    Entry,
    NewRaw,
    SearchFilter,
)
from mcp_memoryrouter.vault.rules.prepare import END, HEADINGS, PREAMBLE
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from mcp_memoryrouter.vault.store.sqlite.lexical import TOKENIZE
from tests.support import FakeClock, Vault

# A record line: its date, the role of a raw memory, then the JSON string.
_RECORD = re.compile(
    r"- \[[0-9: -]+(?: to [0-9-]+)?\] (?:(?:user|assistant|system|observation): )?"
)


_NOTE = re.compile(
    r" \((?:every source of this reflection was deleted"
    r"|1 of its \d+ sources was deleted|(?!1 )\d+ of its \d+ sources were deleted)\)"
)


def records(context: str) -> list[str]:
    """The texts of a context block, read by the frame's own grammar: every line is the
    preamble, a heading, a blank between sections, a record or the end marker (lines split
    at every Unicode line break, as ``str.splitlines`` does)."""
    lines = context.splitlines()
    assert lines[0] == PREAMBLE and lines[-1] == END, context
    assert lines.count(END) == 1 and lines.count(PREAMBLE) == 1
    texts: list[str] = []
    for line in lines[1:-1]:
        if not line or line in HEADINGS.values():
            continue
        opening = _RECORD.match(line)
        assert opening is not None, line
        text, end = json.JSONDecoder().raw_decode(line, opening.end())
        assert line[end:] == "" or _NOTE.fullmatch(line[end:]), line
        texts.append(text)
    return texts


def mint(vault: Vault, name: str) -> tuple[str, str]:
    """A new read-write key of the vault: (the key, its public id)."""
    response = vault.post("/v1/keys", {"name": name})
    assert response.status_code == 201, response.text
    return response.json()["key"], response.json()["id"]


def recount(vault: Vault) -> dict[str, Any]:
    """The debt block computed the slow way, by scanning every row of the vault."""
    raw = vault.sql(
        "SELECT count(*), coalesce(sum(tokens), 0) FROM memories m JOIN keys k "
        "ON k.vault_id = m.vault_id WHERE tier = 1 AND consolidated = 0 AND k.hash = ?",
        (_hash(vault.key),),
    )[0]
    t2 = vault.sql(
        "SELECT count(*), coalesce(sum(importance), 0), coalesce(sum(tokens), 0) FROM memories m "
        "JOIN keys k ON k.vault_id = m.vault_id "
        "WHERE tier = 2 AND consolidated = 0 AND k.hash = ?",
        (_hash(vault.key),),
    )[0]
    return debt_block(Counters(raw[0], raw[1], t2[0], t2[1], t2[2]))


def _hash(key: str) -> str:
    from mcp_memoryrouter.vault.rules.access import hash_key

    return hash_key(key)


def current(vault: Vault) -> dict[str, Any]:
    stats = vault.http.get("/v1/memory/stats", headers=vault.headers()).json()
    block: dict[str, Any] = stats["reflection"]
    return block


def client(url: str, key: str) -> httpx2.Client:
    return httpx2.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def ingest_dated(http: httpx2.Client, count: int) -> list[str]:
    ids: list[str] = []
    for start in range(0, count, 250):
        messages = [
            {
                "role": "user" if i % 2 else "assistant",
                "content": f"Day {i}: worked on feature {i % 17} and fixed bug {i * 7 % 101}.",
                "date": f"2026-{1 + i // 400:02d}-{1 + i // 16 % 25:02d}T{i % 24:02d}:00:00Z",
            }
            for i in range(start, min(count, start + 250))
        ]
        response = http.post("/v1/memory/ingest", json={"messages": messages})
        assert response.status_code == 202
        ids += response.json()["ids"]
    return ids


def reflect_until_empty(
    http: httpx2.Client, tier: int, max_tokens: int | None
) -> list[dict[str, Any]]:
    batches: list[dict[str, Any]] = []
    body: dict[str, Any] = {"tier": tier}
    if max_tokens:
        body["max_tokens"] = max_tokens
    for _ in range(10_000):
        batch = http.post("/v1/memory/consolidate/checkout", json=body).json()
        if batch["batch_id"] is None:
            return batches
        entries = [
            {
                "text": f"What happened in {len(batch['memories'])} moments, part {n}.",
                "importance": 5 + n,
            }
            for n in range(3)
        ]
        done = http.post(
            "/v1/memory/consolidate/commit",
            json={"batch_id": batch["batch_id"], "entries": entries},
        )
        assert done.status_code == 200, done.text
        batches.append({**batch, "commit": done.json()})
    raise AssertionError("the loop did not terminate")


DAY_MS = 86_400_000


VOCABULARY = [
    "apple", "apples", "pear", "plum", "fig", "kiwi", "lime", "grape", "running", "runs",
    "ran", "café", "Zoë", "o'clock", "2024", "march", "x", "the", "and", "walked",
]  # fmt: skip


FILTERS = [
    SearchFilter(),
    SearchFilter(tiers=(1,)),
    SearchFilter(tiers=(2, 3)),
    SearchFilter(min_importance=5),
    SearchFilter(session_id="s1"),
    SearchFilter(window=(5 * DAY_MS, 9 * DAY_MS)),
    SearchFilter(tiers=(1, 2), session_id="s2", window=(0, 20 * DAY_MS)),
]


class Vaults:
    def __init__(self, store: SQLiteStore, seed: int) -> None:
        self.store, self.rng, self.count = store, random.Random(seed), 0
        self.owner: dict[str, str] = {}  # memory id -> vault

    def text(self) -> str:
        return " ".join(self.rng.choices(VOCABULARY, k=self.rng.randint(1, 9)))

    def raw(self, vault: str, count: int) -> list[str]:
        rows = []
        for _ in range(count):
            self.count += 1
            rows.append(
                NewRaw(
                    f"{vault}-{self.count}",
                    "user",
                    self.text(),
                    3,
                    self.rng.randrange(30) * DAY_MS,
                    self.rng.choice([None, "s1", "s2"]),
                    f"{vault}-{self.count}",
                    0,
                )
            )
        ids = self.store.ingest(vault, rows, None)[0]
        self.owner.update(dict.fromkeys(ids, vault))
        return ids

    def reflections(self, vault: str, tier: int, sources: list[str]) -> list[str]:
        entries = [Entry(self.text(), self.rng.randint(1, 10)) for _ in range(4)]
        covers = (self.rng.randrange(10) * DAY_MS, self.rng.randrange(10, 30) * DAY_MS)
        created = self.store.import_reflections(vault, tier, entries, sources, covers, 0, None)  # type: ignore[arg-type]
        self.owner.update({c.id: vault for c in created})
        return [c.id for c in created]


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


def search(vault: Vault, query: str, **extra: Any) -> list[dict[str, Any]]:
    response = vault.post("/v1/memory/search", {"query": query, **extra})
    assert response.status_code == 200, response.text
    rows: list[dict[str, Any]] = response.json()["memories"]
    return rows


class ComposedVault:
    """The vault as ``serve`` composes it, except that the background worker never runs:
    whatever is embedded was embedded by a search (the vault's latest small writes, before
    its vector side), or by a test's ``service.worker.drain()``."""

    def __init__(self, data_dir: Path) -> None:
        settings = Settings(data_dir=data_dir, embeddings="local", rate_limit_per_minute=0)
        self.service, kind = build_service(settings, clock=FakeClock(), start_worker=False)
        app = create_vault_app(settings, service=self.service, store_kind=kind)
        self.http = TestClient(app, raise_server_exceptions=False)
        self.key, _ = self.service.create_vault()

    def post(self, path: str, body: object) -> dict[str, object]:
        response = self.http.post(path, json=body, headers={"X-Memory-Key": self.key})
        assert response.status_code in (200, 202), response.text
        result: dict[str, object] = response.json()
        return result

    def ingest(self, *texts: str, date: str = "2026-02-01T10:00:00Z") -> list[str]:
        body = {"messages": [{"content": t, "date": date} for t in texts]}
        ids: list[str] = self.post("/v1/memory/ingest", body)["ids"]  # type: ignore[assignment]
        return ids

    def pending(self) -> object:
        response = self.http.get("/v1/memory/stats", headers={"X-Memory-Key": self.key})
        return response.json()["pending_embeddings"]


def fts5_ranking(
    store: SQLiteStore, vault_id: str, words: list[str], limit: int, where: SearchFilter
) -> list[tuple[int, float]]:
    """FTS5's own answer, (seq, score) best first: every match of the vault that passes the
    filter, ranked by ``bm25()`` over a corpus of the vault's memories alone (ranking
    statistics are the vault's own); the store's index must use :data:`FTS5_BM25` to agree."""
    sql = (
        "SELECT m.seq, bm25(reference) AS score FROM temp.reference "
        "JOIN main.memories m ON m.seq = reference.rowid "
        "WHERE reference MATCH ? AND m.vault_id = ?"
    )
    params: list[object] = [" OR ".join(f'"{w}"' for w in words), vault_id]
    if where.tiers is not None:
        sql += f" AND m.tier IN ({','.join('?' * len(where.tiers))})"
        params.extend(where.tiers)
    if where.min_importance is not None:
        sql += " AND m.importance >= ?"
        params.append(where.min_importance)
    if where.session_id is not None:
        sql += " AND (m.tier > 1 OR m.session_id = ?)"
        params.append(where.session_id)
    if where.window is not None:
        sql += " AND m.date_from <= ? AND m.date_to >= ?"
        params.extend((where.window[1], where.window[0]))
    with store._reader_conn() as conn:
        # the on-disk index's columns and tokenizer, filled with this vault's rows only
        conn.execute(
            "CREATE VIRTUAL TABLE temp.reference USING fts5 "
            f"(content, dated, tokenize = '{TOKENIZE}')"
        )
        try:
            conn.execute(
                "INSERT INTO temp.reference (rowid, content, dated) "
                "SELECT seq, content, dated FROM main.memories WHERE vault_id = ?",
                (vault_id,),
            )
            rows = conn.execute(sql + " ORDER BY score, m.seq LIMIT ?", [*params, limit]).fetchall()
        finally:
            conn.execute("DROP TABLE temp.reference")
    return [(r[0], -r[1]) for r in rows]
