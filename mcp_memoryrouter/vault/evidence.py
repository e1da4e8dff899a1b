"""Each entry's own evidence at commit (the rule is ``rules/evidence.py``; the SQL
``store/evidence.py``; docs/consolidation.md, "Each entry's own evidence").

Before a commit writes anything, the lines its entries cite are checked against its batch.
After it, outside the commit's transaction, each created reflection is scored against every
source it was built from: with the vault's default embedding model, the cosine of the
reflection's vector (embedded as the vault will embed it: its dates, then its text) and each
source's vector as stored (a source not embedded yet is embedded here, from its dates and
text); without a model, or when the embedding service fails, the lexical score. Then one
short transaction records the ranked evidence and the weak flags.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from mcp_memoryrouter.errors import StoreUnavailable
from mcp_memoryrouter.vault.rules import evidence as rules
from mcp_memoryrouter.vault.rules.domain import CommitOutcome, Entry
from mcp_memoryrouter.vault.search.embeddings import Embedder, Vectors, normalize
from mcp_memoryrouter.vault.search.vectors import embedding_text
from mcp_memoryrouter.vault.store import Store
from mcp_memoryrouter.vault.store.evidence import Unrecorded, Vector

log = logging.getLogger("mcp_memoryrouter.vault.evidence")


def check_cites(store: Store, vault_id: str, batch_id: str, entries: Sequence[Entry]) -> None:
    """Refuse (400) a cited line the batch does not hold, before anything is written (an
    unknown batch is left to the commit, which answers 404)."""
    if any(e.cites for e in entries):
        lines = store.batch_lines(vault_id, batch_id)
        if lines is not None:
            rules.check_cites(entries, lines)


def record(
    store: Store,
    embedder: Embedder | None,
    vault_id: str,
    outcome: CommitOutcome,
    entries: Sequence[Entry],
) -> CommitOutcome:
    """Score and record the committed batch's evidence unless it is recorded already (a
    replay answers the weak flags recorded then): ``outcome`` with each weak flag."""
    model = None if embedder is None else embedder.model_id
    pending = store.unrecorded_evidence(vault_id, outcome.batch_id, model)
    if pending is None:
        return outcome
    # A replay's entries may not be the ones committed: only the first commit's cites count.
    cites = {} if outcome.already_committed else _cites(outcome, entries)
    scored, scoring = _scores(store, pending, embedder)
    found = {
        rid: rules.rank(sources, cites.get(rid, ()), scoring)
        for (rid, _), sources in zip(pending.created, scored, strict=True)
    }
    weak = {
        rid: rules.weak(sources, scoring)
        for (rid, _), sources in zip(pending.created, scored, strict=True)
    }
    flags = store.record_evidence(vault_id, outcome.batch_id, found, weak)
    created = tuple(replace(c, weak_support=flags.get(c.id, False)) for c in outcome.created)
    return replace(outcome, created=created)


def _cites(outcome: CommitOutcome, entries: Sequence[Entry]) -> dict[str, tuple[int, ...]]:
    return {c.id: e.cites for c, e in zip(outcome.created, entries, strict=True)}


def _scores(
    store: Store, pending: Unrecorded, embedder: Embedder | None
) -> tuple[list[list[rules.Scored]], rules.Scoring]:
    """Each created reflection's score against every source, and how they were scored."""
    if embedder is not None and pending.sources:
        try:
            return _cosines(pending, embedder, _reflections(store, pending, embedder)), "cosine"
        except StoreUnavailable:
            log.warning("evidence scored lexically: the embedding service failed")
    source_words = [rules.words(s.content) for s in pending.sources]
    return [
        [
            rules.Scored(s.id, s.line, rules.lexical(rules.words(text), said))
            for s, said in zip(pending.sources, source_words, strict=True)
        ]
        for _, text in pending.created
    ], "lexical"


def _reflections(store: Store, pending: Unrecorded, embedder: Embedder) -> Vectors:
    """The created reflections' vectors. Those still queued for this model are embedded from
    the text the queue holds (what the worker would embed) and stored: the worker has
    nothing left to do for them, so the commit does the embedding it did, not twice."""
    ids = [rid for rid, _ in pending.created]
    queued = store.take_embed_rows(embedder.model_id, ids)
    if len(queued) == len(ids):  # in the order of the entries, as they were inserted
        vectors = embedder.embed([p.text for p in queued])
        store.put_vectors(embedder.model_id, queued, vectors)
        return vectors
    return embedder.embed([embedding_text(text, *pending.covers) for _, text in pending.created])


def _cosines(pending: Unrecorded, embedder: Embedder, entries: Vectors) -> list[list[rules.Scored]]:
    vectors: list[Vector | None] = [
        s.vector if s.vector is not None and s.vector.shape[0] == embedder.dim else None
        for s in pending.sources
    ]
    missing = [i for i, v in enumerate(vectors) if v is None]
    if missing:
        texts = [pending.sources[i] for i in missing]
        found = embedder.embed([embedding_text(s.content, s.date_from, s.date_to) for s in texts])
        for i, vector in zip(missing, found, strict=True):
            vectors[i] = vector
    matrix = normalize(np.stack([v for v in vectors if v is not None]))
    cosines = normalize(entries) @ matrix.T
    return [
        [rules.Scored(s.id, s.line, float(x)) for s, x in zip(pending.sources, row, strict=True)]
        for row in cosines
    ]
