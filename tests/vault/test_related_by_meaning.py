"""Contract 2 finds the reflection a batch line changes by meaning, line by line, among many
(the vector path of ``VaultService._related``; tests/vault/test_current_facts.py covers the
vault without vectors)."""

from __future__ import annotations

import pytest

from mcp_memoryrouter.vault.search.embeddings import Embedders
from tests.support import Vault
from tests.support.api import checkout, commit
from tests.vault.embedders import ConceptEmbedder

CAT = "The cat sleeps on the sofa all afternoon."


@pytest.fixture
def vault_embedders() -> Embedders:
    return Embedders({"concepts": ConceptEmbedder}, "concepts")


def test_one_fact_among_small_talk_finds_the_reflection_it_changes(vault: Vault) -> None:
    vault.ingest(CAT, date="2026-01-05T10:00:00Z")
    for n in range(30):
        vault.ingest(f"Routine note {n}: agenda item {n * 7} reviewed", date="2026-01-06T10:00:00Z")
    batch = checkout(vault, max_tokens=1_000)
    entries = [{"text": m["text"], "importance": 5} for m in batch["memories"]]
    assert commit(vault, batch["batch_id"], entries).status_code == 200  # 31 reflections
    for n in range(12):
        vault.ingest(f"Weather chat {n}: grey skies, wind {n} knots", date="2026-02-01T10:00:00Z")
    vault.ingest("Our new kitten Miso now sleeps on the sofa.", date="2026-02-02T10:00:00Z")
    vault.worker.drain()  # every reflection has its vector
    shown = checkout(vault, contract=2)["reflection_contract"]
    first = next(line for line in shown["instructions"].splitlines() if line.startswith("[R1]"))
    assert first.endswith(CAT)  # the most distinctly related line's reflection, first
    assert len(shown["labels"]) <= 16
