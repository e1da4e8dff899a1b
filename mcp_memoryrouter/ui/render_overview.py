"""The overview's HTML: the tiers' counts, the standing preferences, the reflection debt
with its gauges and the way to consolidate now, and the memories over time (a chart, and its
numbers in a table). Pure functions; the gauges' bounds and the chart's geometry come from
:mod:`.views`."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memoryrouter import schemas
from mcp_memoryrouter.pages.document import esc
from mcp_memoryrouter.ui.render import (
    TIER_HELP,
    TIER_NAMES,
    Viewer,
    csrf_field,
    memory_item,
    page,
)
from mcp_memoryrouter.ui.views import (
    CHART_HEIGHT,
    TIERS,
    Chart,
    ConsolidateNow,
    Gauge,
    chart,
    day,
    gauges,
)

REFLECT_COMMAND = (
    'mcp-memoryrouter reflect --until-empty --key-file vault.key --model-cmd "claude -p"'
)
NO_TIMELINE = '<p class="empty">This vault\'s API does not count memories over time.</p>'


def overview(
    stats: schemas.StatsResponse,
    timeline: schemas.TimelineResponse | None,
    viewer: Viewer,
    *,
    notice: str | None = None,
    offer: ConsolidateNow = ConsolidateNow(),
    preferences: Sequence[schemas.MemoryRow] = (),
) -> str:
    """``preferences``: the current standing preferences to list, most important first."""
    body = (
        f'<section aria-labelledby="tiers-h"><h2 id="tiers-h">Tiers</h2>'
        f'<dl class="counts">{tier_counts(stats)}</dl>{facts(stats, timeline)}</section>'
        f"{preferences_section(preferences, stats.preferences, viewer)}"
        f"{debt_section(stats.reflection, viewer, offer)}"
        f'<section aria-labelledby="chart-h"><h2 id="chart-h">Memories over time</h2>'
        + (NO_TIMELINE if timeline is None else chart_figure(timeline))
        + "</section>"
    )
    return page("Overview", body, viewer, current="/", notice=notice)


def tier_counts(stats: schemas.StatsResponse) -> str:
    return "".join(
        f'<div class="count t{t}"><dt>Tier {t} · {esc(TIER_NAMES[t])}s</dt>'
        f'<dd data-tier="{t}">{stats.tiers[str(t)].count}</dd>'
        f'<dd class="note">{esc(TIER_HELP[t])}</dd></div>'
        for t in (1, 2, 3)
    )


def preferences_section(rows: Sequence[schemas.MemoryRow], total: int, viewer: Viewer) -> str:
    """The current standing preferences and instructions, each linking to its page
    (nothing when the vault holds none)."""
    if not rows:
        return ""
    items = "".join(memory_item(r, viewer, selectable=False) for r in rows)
    shown = (
        f"The {len(rows)} most important of {total}."
        if total > len(rows)
        else "Most important first."
    )
    return (
        '<section aria-labelledby="preferences-h"><h2 id="preferences-h">Standing preferences'
        '</h2><p class="note">Said once, they always apply: prepare and the chat proxy put '
        f"them first in every context they build. {shown}</p>"
        f'<ul class="memories" aria-label="Standing preferences">{items}</ul></section>'
    )


def facts(stats: schemas.StatsResponse, timeline: schemas.TimelineResponse | None) -> str:
    last = None if timeline is None else timeline.last_reflection_at
    return (
        f'<dl class="facts"><dt>Memories</dt><dd id="total">{stats.total_memories}</dd>'
        f"<dt>Tokens</dt><dd>{stats.total_tokens}</dd>"
        f'<dt>Waiting for embedding</dt><dd id="pending">{stats.pending_embeddings}</dd>'
        f"<dt>Oldest</dt><dd>{esc(day(stats.oldest))}</dd>"
        f"<dt>Newest</dt><dd>{esc(day(stats.newest))}</dd>"
        f'<dt>Last consolidation</dt><dd id="last-consolidation">'
        f"{esc(day(last) if last else 'never')}</dd></dl>"
    )


def debt_section(debt: schemas.Reflection, viewer: Viewer, offer: ConsolidateNow) -> str:
    suggestion = (
        f'<p class="suggestion" role="status">{esc(debt.suggestion)}</p>'
        if debt.suggestion
        else '<p class="note">No consolidation is due.</p>'
    )
    return (
        f'<section aria-labelledby="debt-h"><h2 id="debt-h">Reflection debt</h2>'
        f'<p class="note">Consolidation is suggested when either gauge reaches '
        f"{debt.threshold_importance} importance.</p>"
        f"{''.join(gauge(g) for g in gauges(debt))}{suggestion}"
        f"{consolidate_now(offer, viewer)}</section>"
    )


def gauge(g: Gauge) -> str:
    return (
        f'<div class="gauge"><label for="{g.ident}">{esc(g.label)}</label>'
        f'<meter id="{g.ident}" min="0" max="{g.high}" low="{g.low}" '
        f'high="{g.threshold}" optimum="0" value="{g.value}">{g.value} of {g.threshold}</meter>'
        f'<p class="note"><strong>{g.value}</strong> of {g.threshold} importance · '
        f"{esc(g.detail)}</p></div>"
    )


def consolidate_now(offer: ConsolidateNow, viewer: Viewer) -> str:
    head = '<div class="card consolidate"><h3 id="consolidate-h">Consolidate now</h3>'
    if offer.action is not None and not viewer.read_only:
        return (
            f"{head}<p>This server's model writes the reflections: up to three batches of "
            "what waits, below the threshold too, while you wait.</p>"
            f"{reflector_failure(offer)}"
            f'<form method="post" action="{esc(offer.action)}">{csrf_field(viewer)}'
            '<button type="submit">Consolidate now</button></form></div>'
        )
    command = REFLECT_COMMAND + (f" --api-url {offer.api_url}" if offer.api_url else "")
    return (
        f"{head}<p>This server runs no model: your own model writes the reflections. In a "
        "terminal, with a read-write key of this vault in <code>vault.key</code> (readable "
        "by you alone: <code>chmod 600 vault.key</code>), run:</p>"
        f'<pre class="command"><code>{esc(command)}</code></pre>'
        '<p class="note">It consolidates the moments, then the reflections, until nothing is '
        'left waiting. <code>--model-cmd "claude -p"</code> hands each batch to a command of '
        "yours on its standard input (here Claude Code; <code>llm</code> works too); "
        "<code>--model-url URL --model NAME</code> calls an OpenAI-compatible endpoint "
        "instead, with its key in <code>MEMORYROUTER_MODEL_KEY</code> "
        "(docs/consolidation.md).</p></div>"
    )


def reflector_failure(offer: ConsolidateNow) -> str:
    """Why the server's last run for this vault failed: nothing of it was committed."""
    if offer.failed is None:
        return ""
    after = (
        f" The next write after {esc(day(offer.next_run))} (UTC) tries again."
        if offer.next_run
        else ""
    )
    return (
        f'<p class="note" id="reflector-failed">Its last run failed, and committed nothing: '
        f"{esc(offer.failed)}.{after}</p>"
    )


def chart_figure(timeline: schemas.TimelineResponse) -> str:
    """Stacked bars per bucket (tier 1 at the bottom), as SVG, with the same numbers in a
    table for screen readers and for reading exact values."""
    drawn = chart(timeline)
    if drawn is None:
        return '<p class="empty">Nothing remembered yet.</p>'
    return svg(drawn, timeline.bucket) + numbers(timeline)


def svg(drawn: Chart, size: str) -> str:
    rects = "".join(
        f'<rect class="t{b.tier}" x="{b.x:.1f}" y="{b.y:.1f}" '
        f'width="{b.width:.1f}" height="{b.height:.1f}">'
        f"<title>{esc(b.start)}: {b.n} tier {b.tier}</title></rect>"
        for b in drawn.bars
    )
    label = (
        f"Memories per {size} from {drawn.first} to {drawn.last}, "
        f"by tier; at most {drawn.peak} in one {size}"
    )
    legend = "".join(
        f'<li><span class="swatch t{t}"></span>Tier {t} · {esc(TIER_NAMES[t])}s</li>'
        for t in (1, 2, 3)
    )
    return (
        f'<figure class="chart"><svg viewBox="0 0 {drawn.width:.0f} {CHART_HEIGHT}" role="img" '
        f'aria-label="{esc(label)}" preserveAspectRatio="none">{rects}</svg>'
        f'<figcaption><ul class="legend">{legend}</ul>'
        f"<span>{esc(drawn.first)} to {esc(drawn.last)}, per {esc(size)}"
        "</span></figcaption></figure>"
    )


def numbers(timeline: schemas.TimelineResponse) -> str:
    rows = "".join(
        f'<tr><th scope="row">{esc(b.start)}</th>'
        + "".join(f"<td>{b.tiers.get(t, 0)}</td>" for t in TIERS)
        + "</tr>"
        for b in timeline.buckets
    )
    return (
        f"<details><summary>The numbers</summary><table><caption>Memories per "
        f'{esc(timeline.bucket)}</caption><thead><tr><th scope="col">From</th>'
        '<th scope="col">Tier 1</th><th scope="col">Tier 2</th><th scope="col">Tier 3</th>'
        f"</tr></thead><tbody>{rows}</tbody></table></details>"
    )
