"""The chat proxy's block holds the vault's current standing preferences first (through
prepare's default): a preference a later one replaced is left out, and so is what a revoked
key or a write-only key stored. Called with the provider's own client library, in front of
the provider double."""

from __future__ import annotations

from typing import Any

from mcp_memoryrouter.vault.rules.prepare import PREFERENCES
from tests.support.proxy import Proxied, openai_client

METRIC = "Always give distances and weights in metric units."
MILES = "Give running distances in miles; other measures in metric units."
FRENCH = "Always answer in French, whatever language the question is in."
PIRATE = "From now on always answer in pirate speak, it is a standing rule."


def reflect(proxied: Proxied, key: str, entry: dict[str, Any]) -> None:
    """Check out what waits with contract 2 and commit ``entry`` for it (``replaces`` R1:
    the first related reflection the checkout showed)."""
    batch = proxied.vault(
        "POST", "/v1/memory/consolidate/checkout", key, json={"tier": 1, "contract": 2}
    )
    if "replaces" in entry:
        assert batch["reflection_contract"]["labels"] == ["R1"], batch["reflection_contract"]
    body = {"batch_id": batch["batch_id"], "entries": [entry]}
    proxied.vault("POST", "/v1/memory/consolidate/commit", key, json=body)


def said(proxied: Proxied, text: str, day: str, key: str | None = None) -> None:
    message = {"role": "user", "content": text, "date": f"{day}T10:00:00Z"}
    proxied.vault("POST", "/v1/memory/ingest", key, json={"messages": [message]})


def preferences_told(proxied: Proxied) -> None:
    """Metric units, then miles for running (replacing it), by the owner's key; French by a
    key since revoked; pirate speak by a write-only key."""
    owner = proxied.key
    said(proxied, "Please always use metric units with me.", "2026-01-05")
    reflect(proxied, owner, {"text": METRIC, "importance": 8, "kind": "preference"})
    said(proxied, "Actually, use miles for running, I think in miles.", "2026-03-05")
    entry = {"text": MILES, "importance": 8, "kind": "preference", "replaces": ["R1"]}
    reflect(proxied, owner, entry)
    other = proxied.vault("POST", "/v1/keys", json={"name": "old laptop"})
    said(proxied, "Please answer me in French from now on.", "2026-04-05", other["key"])
    reflect(proxied, other["key"], {"text": FRENCH, "importance": 9, "kind": "preference"})
    proxied.vault("DELETE", f"/v1/keys/{other['id']}")
    logger = proxied.vault("POST", "/v1/keys", json={"name": "logger"})["key"] + ":write"
    said(proxied, PIRATE, "2026-05-05", logger)


def test_the_proxied_block_starts_with_the_current_preferences_a_current_key_stored(
    proxied: Proxied,
) -> None:
    preferences_told(proxied)
    assert proxied.vault("GET", "/v1/memory/stats")["preferences"] == 2  # miles and French
    client = openai_client(proxied.url, proxied.key)
    question = "How far is a half marathon, and what should I eat before it?"
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-test", messages=[{"role": "user", "content": question}]
    )
    assert raw.headers["x-memory-status"] == "ok"
    block = proxied.upstream.last.json["messages"][0]
    assert block["role"] == "system"
    lines = block["content"].splitlines()
    assert lines[1] == PREFERENCES
    assert MILES in lines[2]
    # replaced, stored by a revoked key, stored by a write-only key: none reaches the model
    for absent in (METRIC, FRENCH, "French", "pirate"):
        assert absent not in block["content"], absent
