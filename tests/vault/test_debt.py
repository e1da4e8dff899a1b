"""Reflection debt equals a full recount after every kind of write, and rides on responses."""

from __future__ import annotations

import random
from typing import Any

from mcp_memoryrouter.vault.rules.debt import debt_block
from mcp_memoryrouter.vault.rules.domain import Counters
from tests.support import Vault
from tests.support.store import current, recount


def all_ids(vault: Vault, tier: int) -> list[str]:
    return [r[0] for r in vault.sql("SELECT id FROM memories WHERE tier = ?", (tier,))]


def test_debt_matches_a_full_recount_after_every_write(vault: Vault) -> None:
    rng = random.Random(7)
    other = vault.new_key()
    vault.ingest("noise in another vault " * 200, key=other)
    for step in range(60):
        action = rng.choice(["ingest", "ingest", "reflect1", "reflect2", "delete", "lease"])
        if action == "ingest":
            texts = [
                ("w" * rng.randint(1, 3000)) + f" {step}-{n}" for n in range(rng.randint(1, 5))
            ]
            response: dict[str, Any] = vault.ingest(
                *texts, date=f"2026-02-{rng.randint(1, 28):02d}"
            )
            assert response["reflection"] == recount(vault)
        elif action in ("reflect1", "reflect2", "lease"):
            tier = 2 if action == "reflect2" else 1
            batch = vault.post(
                "/v1/memory/consolidate/checkout",
                {"tier": tier, "max_tokens": rng.randint(1000, 4000)},
            ).json()
            assert current(vault) == recount(vault)  # leased rows still count as debt
            if batch["batch_id"] and action != "lease":
                entries = [
                    {"text": f"Reflection {step} {n}.", "importance": rng.randint(1, 10)}
                    for n in range(rng.randint(1, 6))
                ]
                body = vault.post(
                    "/v1/memory/consolidate/commit",
                    {"batch_id": batch["batch_id"], "entries": entries},
                ).json()
                assert body["reflection"] == recount(vault)
            elif batch["batch_id"]:
                vault.clock.advance(901)
        else:
            pool = all_ids(vault, rng.choice([1, 2, 3]))
            doomed = rng.sample(pool, min(len(pool), rng.randint(1, 4)))
            if doomed:
                body = vault.post("/v1/memory/delete-ids", {"ids": doomed}).json()
                assert body["reflection"] == recount(vault)
        assert current(vault) == recount(vault)
    wiped = vault.http.delete("/v1/memory", headers=vault.headers()).json()
    assert wiped["reflection"] == recount(vault) == debt_block(Counters())


def test_debt_rides_on_ingest_search_commit_and_stats(vault: Vault) -> None:
    big = "a" * 200_000  # 50,000 tokens in ~440-token units: exactly 150 importance
    ingest = vault.ingest(big)
    assert ingest["reflection"]["suggestion"] == (
        "raw consolidation suggested: 150 unconsolidated importance"
    )
    search = vault.post("/v1/memory/search", {"query": "aaaa"}).json()
    assert search["reflection"] == ingest["reflection"] == recount(vault)
