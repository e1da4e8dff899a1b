"""What the explorer's pages say, worked out before any HTML: the forms' values, the counts a
delete takes, the chart's geometry, the gauges' bounds, and the sentences made of counts.
Pure functions of the vault's wire models; the renderers (``render*.py``) only place them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal

from mcp_memoryrouter import schemas
from mcp_memoryrouter.words import counted

CHART_HEIGHT = 120
CHART_MAX_BARS = 400  # past this, empty buckets are left out of the chart
TIERS = ("1", "2", "3")


def count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def day(text: str | None) -> str:
    """An ISO instant shown as its date and minute (UTC)."""
    if not text:
        return "—"
    return text[:16].replace("T", " ")


# --- the search and timeline forms ------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """What the search and timeline forms ask: the API's filters, as typed."""

    query: str = ""
    tiers: tuple[int, ...] = ()
    importance: int | None = None
    date_from: str = ""
    date_to: str = ""
    order: Literal["newest_first", "oldest_first"] = "newest_first"
    limit: int = 20


def query_of(f: Filters) -> dict[str, object]:
    return {
        "q": f.query,
        "tier": list(f.tiers),
        "importance": f.importance,
        "from": f.date_from,
        "to": f.date_to,
        "order": f.order if f.order != "newest_first" else None,
    }


def page_span(rows: Sequence[schemas.MemoryRow]) -> str:
    """The time the rows shown cover, from their own dates (never a bound of the request,
    which may be unset)."""
    starts = [r.covers.from_ if r.covers else r.date for r in rows]
    ends = [r.covers.to if r.covers else r.date for r in rows]
    first = min((s for s in starts if s), default=None)
    last = max((e for e in ends if e), default=None)
    if first is None or last is None:
        return ""
    if day(first) == day(last):
        return f"This page: {day(first)}."
    return f"This page: {day(first)} to {day(last)}."


# --- the overview -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ConsolidateNow:
    """How the overview offers to consolidate now. Until the server runs a model of its own,
    the command to run with one's own model (``api_url``: what its ``--api-url`` names, None
    for the default); once it does, ``action`` (the path a "Consolidate now" button posts
    to, with the session's token) takes the command's place."""

    api_url: str | None = None
    action: str | None = None
    # the server's reflector's last failure for this vault, and when a write may start the
    # next run (docs/reflector.md), shown beside the button
    failed: str | None = None
    next_run: str | None = None


@dataclass(frozen=True)
class Gauge:
    """One reflection-debt gauge: ``value`` against ``threshold``, drawn up to ``high``
    and shown as low below ``low``."""

    ident: str
    label: str
    value: int
    threshold: int
    detail: str

    @property
    def high(self) -> int:
        return max(self.threshold, self.value, 1)

    @property
    def low(self) -> int:
        return int(self.threshold * 0.5)


def gauges(debt: schemas.Reflection) -> tuple[Gauge, Gauge]:
    raw, tier2 = debt.unconsolidated.raw, debt.unconsolidated.tier2
    return (
        Gauge(
            "raw-debt",
            "Moments waiting to be consolidated",
            raw.importance_equiv,
            debt.threshold_importance,
            f"{counted(raw.units, 'moment', 'moments')}, about {raw.est_tokens} tokens",
        ),
        Gauge(
            "tier2-debt",
            "Reflections waiting to be consolidated",
            tier2.importance,
            debt.threshold_importance,
            f"{counted(tier2.count, 'reflection', 'reflections')}, about {tier2.est_tokens} tokens",
        ),
    )


@dataclass(frozen=True)
class Bar:
    """One tier's part of one bucket's bar, in the chart's coordinates."""

    start: str
    tier: str
    n: int
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class Chart:
    """Stacked bars per bucket, tier 1 at the bottom; ``peak``: the most in one bucket."""

    width: int
    bars: tuple[Bar, ...]
    first: str
    last: str
    peak: int


def chart(timeline: schemas.TimelineResponse) -> Chart | None:
    """The chart of ``timeline`` (None: nothing remembered yet)."""
    if not timeline.buckets:
        return None
    filled = fill_gaps(timeline.buckets, timeline.bucket)
    peak = max(sum(b.tiers.values()) for b in filled) or 1
    width = max(len(filled) * 12, 240)
    step = width / len(filled)
    bars = [bar for i, b in enumerate(filled) for bar in stacked(b, i * step, step, peak)]
    return Chart(width, tuple(bars), filled[0].start, filled[-1].start, peak)


def stacked(bucket: schemas.TimelineBucket, x: float, step: float, peak: int) -> list[Bar]:
    bars, y = [], float(CHART_HEIGHT)
    for tier in TIERS:
        n = bucket.tiers.get(tier, 0)
        if not n:
            continue
        height = n / peak * (CHART_HEIGHT - 4)
        y -= height
        bars.append(Bar(bucket.start, tier, n, x + 1, y, max(step - 2, 1), height))
    return bars


def fill_gaps(buckets: Sequence[schemas.TimelineBucket], size: str) -> list[schemas.TimelineBucket]:
    """The buckets with the empty ones between them, so bars stand at their place in time;
    as they are when that would make more than :data:`CHART_MAX_BARS` bars."""
    present = {b.start: b for b in buckets}
    out: list[schemas.TimelineBucket] = []
    cursor = date.fromisoformat(buckets[0].start)
    last = date.fromisoformat(buckets[-1].start)
    while cursor <= last:
        if len(out) >= CHART_MAX_BARS:
            return list(buckets)
        key = cursor.isoformat()
        out.append(present.get(key) or schemas.TimelineBucket(start=key, tiers={}))
        following = _next_start(cursor, size)
        if following is None:
            break
        cursor = following
    return out


def _next_start(start: date, size: str) -> date | None:
    """The next bucket's first day; None past the calendar's end (9999-12-31)."""
    try:
        if size == "day":
            return start + timedelta(days=1)
        if size == "week":
            return start + timedelta(days=7)
        return date(start.year + start.month // 12, start.month % 12 + 1, 1)
    except (OverflowError, ValueError):
        return None


# --- a memory ---------------------------------------------------------------------------------


def sources_summary(found: schemas.InspectResponse, *, paged: bool) -> str:
    """How many sources a reflection was built from, how many are gone, and which of those
    left the page lists."""
    total, deleted = found.sources_total or 0, found.sources_deleted or 0
    offset, shown = found.offset or 0, len(found.sources or [])
    summary = count(total, "source", "sources")
    if deleted:
        summary += f", {deleted} of them deleted"
    if found.orphaned:
        return summary + ": every source is gone, this reflection stands alone."
    if not shown:
        return summary + "."
    order = "most similar first"
    evidence = found.evidence_total or 0  # its own evidence first (docs/consolidation.md)
    if evidence >= total - deleted > 0:
        order = "each one its evidence"
    elif evidence:
        order = f"its evidence first ({count(evidence, 'source', 'sources')}), then the rest"
    if paged or offset:
        listed = f"Listed below: {offset + 1} to {offset + shown} of the {total - deleted}"
        return f"{summary}. {listed}, {order}."
    if shown == 1:
        return f"{summary}. {'The one left' if deleted else 'It'} is listed below."
    listed = f"The {shown} left are" if deleted else f"All {shown} are"
    return f"{summary}. {listed} listed below, {order}."


@dataclass(frozen=True)
class DeletePlan:
    """What deleting a selection takes, from two dry runs (the selection alone, and with
    every reflection built from it). ``known``: the vault could dry-run; ``above``: the
    reflections built from the selection that go with it; ``freed``: the sources that return
    to the unconsolidated pool (``returned``: how many at each tier, none of them zero);
    ``listing``: (tier, id) of everything the derived delete takes; ``by_evidence``: the
    reflections a delete that follows evidence takes with the selection (None: not known)."""

    selected: int
    gone: int
    known: bool
    above: int
    freed: int
    returned: tuple[tuple[str, int], ...]
    listing: tuple[tuple[int, str], ...]
    by_evidence: int | None = None

    @property
    def offer_evidence(self) -> bool:
        """A third button, for the delete that follows evidence: when it would keep some of
        the reflections the derived delete takes."""
        return self.by_evidence is not None and self.by_evidence < self.above

    @property
    def found(self) -> int:
        return self.selected - self.gone

    @property
    def offer_derived(self) -> bool:
        """A second button, for the derived delete: when it would take more than the
        selection, or when the vault cannot say."""
        return not self.known or self.above > 0 or self.freed > 0


def delete_plan(
    ids: Sequence[str],
    alone: schemas.DeleteIdsResponse | None,
    derived: schemas.DeleteIdsResponse | None,
) -> DeletePlan:
    """``alone``, ``derived``: the two dry runs (None: the vault cannot dry-run)."""
    by_tier = {} if derived is None else derived.by_tier or {}
    alone_by_tier = {} if alone is None else alone.by_tier or {}
    pool = {} if derived is None else derived.returned_to_pool or {}
    choice = None if derived is None else (derived.choices or {}).get("evidence")
    return DeletePlan(
        selected=len(ids),
        gone=0 if alone is None else alone.not_found,
        known=derived is not None,
        above=reflections(by_tier) - reflections(alone_by_tier),
        freed=sum(pool.values()),
        returned=tuple((t, n) for t, n in sorted(pool.items()) if n),
        listing=tuple((int(t), i) for t, group in sorted(by_tier.items()) for i in group),
        by_evidence=None
        if choice is None
        else reflections(choice.by_tier) - reflections(alone_by_tier),
    )


def reflections(by_tier: Mapping[str, Sequence[str]]) -> int:
    return sum(len(ids) for tier, ids in by_tier.items() if tier != "1")
