"""Domain records → wire models of ``schemas.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp_memoryrouter import schemas
from mcp_memoryrouter.vault.rules import contract, debt
from mcp_memoryrouter.vault.rules.dates import format_ms
from mcp_memoryrouter.vault.rules.domain import (
    REFLECTOR_ENDPOINT,
    Batch,
    CommitOutcome,
    Counters,
    DeleteOutcome,
    EmptyCheckout,
    ExportedMemory,
    KeyRecord,
    Lineage,
    Mark,
    Memory,
    ReflectorRuns,
    ScoredMemory,
    Stats,
    Support,
    UsageLine,
    Writer,
)
from mcp_memoryrouter.vault.rules.timeline import Timeline


def reflection(counters: Counters) -> schemas.Reflection:
    return schemas.Reflection.model_validate(debt.debt_block(counters))


def covers(start: int, end: int) -> schemas.Covers:
    return schemas.Covers(from_=format_ms(start), to=format_ms(end))


def search_row(hit: ScoredMemory) -> schemas.MemoryRow:
    m = hit.memory
    score = None if hit.score is None else round(hit.score, 6)
    if m.tier == 1:
        return schemas.MemoryRow(
            id=m.id,
            tier=m.tier,
            content=m.content,
            score=score,
            date=format_ms(m.date_from),
            role=m.role,
            stored_by=stored_by(m.stored_by),
            **currency(m),
        )
    return schemas.MemoryRow(
        **currency(m),
        id=m.id,
        tier=m.tier,
        content=m.content,
        score=score,
        covers=covers(m.date_from, m.date_to),
        importance=m.importance,
        stored_by=stored_by(m.stored_by),
        **support(m.support),
    )


def ingested(
    stored: int,
    ids: list[str],
    debt: schemas.Reflection,
    similar: Sequence[tuple[str, float]] | None,
    skipped: Sequence[tuple[int, str, float]] | None,
) -> schemas.IngestResponse:
    """An ingest's answer, with the near-duplicates it found and what ``dedupe`` skipped."""
    return schemas.IngestResponse(
        stored=stored,
        duplicates=len(ids) - stored,
        ids=ids,
        reflection=debt,
        similar=None if similar is None else [schemas.Similar(id=i, score=s) for i, s in similar],
        skipped=None
        if skipped is None
        else [schemas.Skipped(index=n, id=i, score=s) for n, i, s in skipped],
    )


def stored_by(writer: Writer | None) -> schemas.StoredBy | None:
    """What stored a memory, as rows show it; None for one stored before surfaces were kept
    (its key alone, from before migration 8, is not shown without its surface)."""
    if writer is None or writer.surface not in schemas.SURFACES:
        return None
    return schemas.StoredBy(
        surface=writer.surface,
        key_id=writer.key_id,
        key_name=writer.key_name,
        client=writer.client,
    )


def support(found: Support | None) -> dict[str, Any]:
    """A reflection row's support fields (none when the reader did not count them)."""
    if found is None:
        return {}
    return {
        "sources_total": found.total,
        "sources_deleted": found.deleted,
        "orphaned": True if found.orphaned else None,  # marked only when it is
    }


def checkout(result: Batch | EmptyCheckout) -> schemas.CheckoutResponse:
    if isinstance(result, EmptyCheckout):
        message = "nothing unconsolidated"
        if result.leased:
            message = (
                f"nothing available: {result.leased} unconsolidated memories are leased "
                "to other batches"
            )
        return schemas.CheckoutResponse(batch_id=None, count=0, message=message)
    return schemas.CheckoutResponse(
        batch_id=result.batch_id,
        tier=result.tier,
        count=len(result.sources),
        est_tokens=result.est_tokens,
        covers=covers(result.covers_from, result.covers_to),
        lease_expires_at=format_ms(result.lease_until),
        memories=[
            schemas.CheckoutMemory(
                text=s.content,
                date=format_ms(s.date_from),
                line=line if result.contract == 2 else None,
            )
            for line, s in enumerate(result.sources, 1)
        ],
        source_ids=[s.id for s in result.sources],
        reflection_contract=schemas.ReflectionContract.model_validate(
            contract.reflection_contract(result.tier, result.contract, result.related)
        ),
        tier_definitions=schemas.TierDefinitions.model_validate(
            contract.tier_definitions(result.tier)
        ),
    )


def committed(outcome: CommitOutcome, counters: Counters) -> schemas.CommitResponse:
    return schemas.CommitResponse(
        batch_id=outcome.batch_id,
        committed=True,
        already_committed=outcome.already_committed,
        tier=outcome.target_tier,
        created=[
            schemas.CreatedReflection(
                id=c.id, importance=c.importance, weak_support=c.weak_support or None
            )
            for c in outcome.created
        ],
        sources_consolidated=outcome.sources_consolidated,
        reflection=reflection(counters),
    )


def currency(m: Memory) -> dict[str, Any]:
    """A memory's ``superseded`` and ``kind`` fields, when set."""
    fields: dict[str, Any] = {"kind": m.kind}
    if m.superseded is not None:
        fields["superseded"] = schemas.SupersededBy(
            at=format_ms(m.superseded.at), by=m.superseded.by
        )
    return fields


def lineage_row(m: Memory, score: float | None = None) -> schemas.LineageRow:
    return schemas.LineageRow(
        id=m.id,
        tier=m.tier,
        content=m.content,
        role=m.role,
        importance=m.importance,
        date=format_ms(m.date_from),
        covers=None if m.tier == 1 else covers(m.date_from, m.date_to),
        score=None if score is None else round(score, 4),
        stored_by=stored_by(m.stored_by),
        **currency(m),
        **support(m.support),
    )


def inspect(found: Lineage, offset: int, page: int) -> schemas.InspectResponse:
    m = found.memory
    body = schemas.InspectResponse(
        memory_id=m.id,
        tier=m.tier,
        content=m.content,
        date=format_ms(m.date_from),
        role=m.role,
        importance=m.importance,
        batch_id=m.batch_id,
        covers=None if m.tier == 1 else covers(m.date_from, m.date_to),
        stored_by=stored_by(m.stored_by),
        **currency(m),
    )
    if m.tier > 1:
        present = found.sources_total - found.sources_deleted
        truncated = offset + len(found.sources) < present
        scores = found.scores or (None,) * len(found.sources)
        body.sources = [lineage_row(s, x) for s, x in zip(found.sources, scores, strict=True)]
        for row, mark in zip(body.sources, found.marks, strict=False):
            row.evidence = evidence_mark(mark)
        body.evidence_total = found.evidence_total or None
        body.weak_support = found.weak_support or None
        body.sources_total = found.sources_total
        body.sources_deleted = found.sources_deleted
        body.orphaned = support(m.support).get("orphaned")
        body.truncated = truncated
        body.offset = offset
        body.next_offset = offset + page if truncated else None
    if m.tier < 3:
        body.consolidated_into = [lineage_row(p) for p in found.consolidated_into]
    return body


def evidence_mark(mark: Mark | None) -> schemas.EvidenceMark | None:
    """A source's place in the inspected reflection's own evidence (None: not part of it)."""
    if mark is None:
        return None
    return schemas.EvidenceMark(rank=mark.rank, score=mark.score, cited=mark.cited)


def deleted(outcome: DeleteOutcome, counters: Counters, listed: bool) -> schemas.DeleteIdsResponse:
    """A delete's answer; ``listed`` (a derived delete or a dry run) adds what went (would
    go) at each tier and what returned to the pool."""
    body = schemas.DeleteIdsResponse(
        requested=outcome.requested,
        deleted=outcome.deleted,
        do_deleted=outcome.deleted,
        not_found=outcome.not_found,
        legacy_fallback_used=0,
        failed=[],
        reflection=reflection(counters),
    )
    if listed:
        body.dry_run = outcome.dry_run
        body.by_tier = {str(t): list(ids) for t, ids in outcome.by_tier.items()}
        body.returned_to_pool = {str(t): n for t, n in outcome.returned.items()}
    if outcome.choices:
        body.choices = {
            way: schemas.DeleteChoice(
                by_tier={str(t): list(ids) for t, ids in choice.by_tier.items()},
                returned_to_pool={str(t): n for t, n in choice.returned.items()},
            )
            for way, choice in outcome.choices.items()
        }
    return body


def server_reflector(runs: ReflectorRuns, configured: bool, now_ms: int) -> schemas.ServerReflector:
    return schemas.ServerReflector(
        configured=configured,
        enabled=runs.enabled,
        running=runs.held_until_ms > now_ms,
        last_run=None if runs.last_run_ms is None else format_ms(runs.last_run_ms),
        last_outcome=runs.last_outcome,
        last_error=runs.last_error,
        last_batches=runs.last_batches,
        last_reflections=runs.last_reflections,
        failures=runs.failures,
        next_run_after=format_ms(runs.next_after_ms) if runs.next_after_ms > now_ms else None,
    )


def stats(
    found: Stats,
    pending_embeddings: int,
    reflector: schemas.ServerReflector | None = None,
    preferences: int = 0,
) -> schemas.StatsResponse:
    tiers = {
        str(tier): schemas.TierStats(
            count=t.count, est_tokens=t.tokens, importance=None if tier == 1 else t.importance
        )
        for tier, t in found.totals.items()
    }
    return schemas.StatsResponse(
        vault=found.vault_ref,
        total_memories=sum(t.count for t in found.totals.values()),
        total_tokens=sum(t.tokens for t in found.totals.values()),
        tiers=tiers,
        oldest=None if found.oldest_ms is None else format_ms(found.oldest_ms),
        newest=None if found.newest_ms is None else format_ms(found.newest_ms),
        pending_embeddings=pending_embeddings,
        preferences=preferences,
        reflection=reflection(found.counters),
        server_reflector=reflector,
    )


def timeline(found: Timeline) -> schemas.TimelineResponse:
    return schemas.TimelineResponse(
        vault=found.vault_ref,
        bucket=found.size,
        buckets=[
            schemas.TimelineBucket(
                start=b.start.isoformat(), tiers={str(t): n for t, n in b.tiers.items()}
            )
            for b in found.buckets
        ],
        last_reflection_at=(
            None if found.last_reflection_ms is None else format_ms(found.last_reflection_ms)
        ),
    )


def _add(bucket: dict[str, int], line: UsageLine) -> None:
    bucket["events"] += line.events
    bucket[f"{line.kind}_tokens"] += line.tokens


def usage(
    vault_ref: str, lines: Sequence[UsageLine], start: int, end: int
) -> schemas.UsageResponse:
    def empty() -> dict[str, int]:
        return {"events": 0, "retrieval_tokens": 0, "storage_tokens": 0, "deletion_tokens": 0}

    totals = empty()
    by_endpoint: dict[str, dict[str, int]] = {}
    by_session: dict[str, dict[str, int]] = {}
    spent = {"calls": 0, "input_tokens": 0, "output_tokens": 0}
    for line in lines:
        if line.endpoint == REFLECTOR_ENDPOINT:  # the provider's tokens, apart
            _spent(spent, line)
            continue
        _add(totals, line)
        _add(by_endpoint.setdefault(line.endpoint, empty()), line)
        if line.session_id is not None:
            _add(by_session.setdefault(line.session_id, empty()), line)
    return schemas.UsageResponse.model_validate(
        {
            "vault": vault_ref,
            "period": {"from": format_ms(start), "to": format_ms(end)},
            "totals": totals,
            "by_endpoint": by_endpoint,
            "by_session": by_session,
            "reflector": spent,
        }
    )


def _spent(spent: dict[str, int], line: UsageLine) -> None:
    if line.kind == "provider_input":
        spent["calls"] += line.events
        spent["input_tokens"] += line.tokens
    else:
        spent["output_tokens"] += line.tokens


def key_created(key: str, record: KeyRecord) -> schemas.KeyCreated:
    """A key just minted: its secret, shown this once."""
    return schemas.KeyCreated(
        id=record.id,
        key=key,
        name=record.name,
        read_only=record.read_only,
        created_at=format_ms(record.created_ms),
    )


def key(record: KeyRecord) -> schemas.KeyListed:
    last = record.last_used_ms
    return schemas.KeyListed(
        id=record.id,
        name=record.name,
        prefix=record.prefix,
        read_only=record.read_only,
        created_at=format_ms(record.created_ms),
        last_used_at=None if last is None else format_ms(last),
    )


def export_line(exported: ExportedMemory) -> dict[str, object]:
    """One line of ``GET /v1/memory/export`` (the format of docs/backup.md)."""
    m = exported.memory
    if m.tier == 1:
        line: dict[str, object] = {
            "id": m.id,
            "tier": 1,
            "role": m.role,
            "content": m.content,
            "date": format_ms(m.date_from),
        }
        if m.session_id is not None:
            line["session_id"] = m.session_id
    else:
        line = {
            "id": m.id,
            "tier": m.tier,
            "content": m.content,
            "importance": m.importance,
            "covers": {"from": format_ms(m.date_from), "to": format_ms(m.date_to)},
            "sources": list(exported.sources),
        }
        if exported.sources_deleted:
            line["sources_deleted"] = exported.sources_deleted
        if m.kind is not None:
            line["kind"] = m.kind
        if m.superseded is not None:  # replaced by a later one: when, and by which
            line["superseded"] = {"at": format_ms(m.superseded.at), "by": m.superseded.by}
    if m.tier < 3:
        line["consolidated"] = exported.consolidated
    origin = stored_by(m.stored_by)
    if origin is not None:
        line["stored_by"] = origin.model_dump(mode="json")
    return line
