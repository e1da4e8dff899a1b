"""The explorer's HTML, built from the vault's wire models: pure functions, no I/O.

Every value that reaches a page goes through :func:`esc`. Pages carry no inline script and
no inline style (the Content-Security-Policy forbids both); the one stylesheet and the one
script are served by the explorer itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from html import escape
from typing import Literal
from urllib.parse import quote, urlencode

from mcp_memoryrouter import schemas
from mcp_memoryrouter.pages.document import document

PREFIX = "/ui"
TIER_NAMES = {1: "moment", 2: "reflection", 3: "high-level reflection"}
TIER_HELP = {
    1: "what was said, as it was said",
    2: "what happened, consolidated from moments",
    3: "why it matters, consolidated from reflections",
}
SNIPPET_CHARS = 280
CHART_HEIGHT = 120
CHART_MAX_BARS = 400  # past this, empty buckets are left out of the chart


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def url(path: str, **query: object) -> str:
    """A link inside the explorer, with the query's non-empty values."""
    pairs: list[tuple[str, str]] = []
    for name, value in query.items():
        if value is None or value == "" or value is False:
            continue
        if isinstance(value, (list, tuple)):
            pairs += [(name, str(v)) for v in value]
        else:
            pairs.append((name, str(value)))
    return PREFIX + path + ("?" + urlencode(pairs) if pairs else "")


@dataclass(frozen=True)
class Viewer:
    """Who is looking: the signed-in vault, whether it may change anything, the CSRF token."""

    vault_ref: str
    read_only: bool
    csrf: str


NAV = [
    ("/", "Overview"),
    ("/search", "Search"),
    ("/timeline", "Timeline"),
    ("/add", "Add"),
    ("/tidy", "Tidy"),
]
WRITERS_ONLY = {"/add"}  # a read-only key's pages do not offer these


def page(
    title: str,
    body: str,
    viewer: Viewer | None = None,
    *,
    current: str = "",
    notice: str | None = None,
    error: str | None = None,
) -> str:
    header = ""
    if viewer is not None:
        links = "".join(
            f'<li><a href="{esc(PREFIX + path if path != "/" else PREFIX)}"'
            + (' aria-current="page"' if path == current else "")
            + f">{esc(label)}</a></li>"
            for path, label in NAV
            if not (viewer.read_only and path in WRITERS_ONLY)
        )
        mode = " · read-only key" if viewer.read_only else ""
        header = (
            '<header class="top"><nav aria-label="Explorer"><ul>'
            f"{links}</ul></nav>"
            f'<p class="who">Vault <code>{esc(viewer.vault_ref)}</code>{esc(mode)}</p>'
            f'<form method="post" action="{PREFIX}/sign-out" class="signout">'
            f'{csrf_field(viewer)}<button type="submit">Sign out</button></form></header>'
        )
    flash = ""
    if notice:
        flash += f'<p class="notice" role="status">{esc(notice)}</p>'
    if error:
        flash += f'<p class="error" role="alert">{esc(error)}</p>'
    return document(
        title,
        flash + body,
        site="Memory explorer",
        stylesheet_url=f"{PREFIX}/static/explorer.css",
        script_url=f"{PREFIX}/static/explorer.js",
        header=header,
        footer='<footer><p class="note">Times are UTC.</p></footer>',
    )


def csrf_field(viewer: Viewer) -> str:
    return f'<input type="hidden" name="csrf" value="{esc(viewer.csrf)}">'


# --- sign-in ----------------------------------------------------------------------------------


def sign_in(
    token: str,
    *,
    needs_key: bool,
    next_path: str = PREFIX,
    notice: str | None = None,
    error: str | None = None,
    providers: Sequence[tuple[str, str]] = (),
) -> str:
    """The sign-in form: a memory key, a button for each identity provider people sign in
    with (``providers``: key and name), or one button for a local vault without keys."""
    if providers:
        # links, not forms: the page's form-action 'self' would stop a form's redirect to
        # the provider; starting a sign-in changes nothing until the provider says who it is
        links = [
            (url("/sign-in/provider", provider=key, next=next_path), n) for key, n in providers
        ]
        buttons = "".join(
            f'<p><a class="button" href="{esc(link)}">Continue with {esc(name)}</a></p>'
            for link, name in links
        )
        body = (
            f'<div class="card">{buttons}'
            '<p class="note">Sign in as you do when you connect an app to this server: the '
            "vault made for you at your first sign-in opens. This browser keeps only a session "
            "cookie.</p></div>"
        )
        return page("Sign in", body, notice=notice, error=error)
    if needs_key:
        field = (
            '<label for="key">Memory key</label>'
            '<input id="key" name="key" type="password" autocomplete="current-password" '
            'required spellcheck="false" autocapitalize="off">'
            '<p class="note">A key starts with <code>mk_</code>. It is checked with the vault '
            "and kept on the server, sealed; this browser keeps only a session cookie. A "
            "read-only key can look at everything and change nothing.</p>"
        )
        action = "Sign in"
    else:
        field = '<p class="note">This server serves one local vault without keys.</p>'
        action = "Open the vault"
    body = (
        f'<form method="post" action="{PREFIX}/sign-in" class="card">'
        f'<input type="hidden" name="csrf" value="{esc(token)}">'
        f'<input type="hidden" name="next" value="{esc(next_path)}">{field}'
        f'<button type="submit">{action}</button></form>'
    )
    return page("Sign in", body, notice=notice, error=error)


def signed_in(next_path: str) -> str:
    """Where the identity provider's sign-in lands: on to ``next_path`` from this page, so
    the browser sends the explorer's same-site cookie with the next request (a redirect
    straight from the provider's cross-site navigation would not)."""
    target = esc(next_path)
    body = f'<p><a class="button" href="{target}">Open the explorer</a></p>'
    document = page("Signed in", body)
    return document.replace(
        "<head>", f'<head><meta http-equiv="refresh" content="0;url={target}">', 1
    )


def sign_in_notice(message: str) -> str:
    """A refusal that needs a new sign-in (a form sent after its session ended)."""
    body = f'<p><a class="button" href="{PREFIX}/sign-in">Sign in</a></p>'
    return page("Signed out", body, error=message)


# --- pieces -----------------------------------------------------------------------------------


def day(text: str | None) -> str:
    """An ISO instant shown as its date and minute (UTC)."""
    if not text:
        return "—"
    return text[:16].replace("T", " ")


def when(row: schemas.MemoryRow | schemas.LineageRow) -> str:
    if row.covers is not None:
        return covering(row.covers)
    return f'<span class="when"><time datetime="{esc(row.date)}">{esc(day(row.date))}</time></span>'


def covering(covers: schemas.Covers) -> str:
    return (
        f'<span class="when">covers <time datetime="{esc(covers.from_)}">{esc(day(covers.from_))}'
        f'</time> to <time datetime="{esc(covers.to)}">{esc(day(covers.to))}</time></span>'
    )


def tier_tag(tier: int) -> str:
    return f'<span class="tag t{tier}">Tier {tier} · {esc(TIER_NAMES[tier])}</span>'


def support(row: schemas.MemoryRow | schemas.LineageRow | schemas.InspectResponse) -> str:
    if row.sources_total is None:
        return ""
    deleted = row.sources_deleted or 0
    text = f"{row.sources_total} source{'s' if row.sources_total != 1 else ''}"
    if deleted:
        text += f", {deleted} deleted"
    if row.orphaned:
        text += " (orphaned: every source is gone)"
    return f'<span class="support">{esc(text)}</span>'


def snippet(text: str) -> str:
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1].rstrip() + "…"


def memory_url(memory_id: str, **query: object) -> str:
    return url("/memories/" + quote(memory_id, safe=""), **query)


def memory_item(
    row: schemas.MemoryRow | schemas.LineageRow, viewer: Viewer, *, selectable: bool = True
) -> str:
    meta = [tier_tag(row.tier), when(row)]
    if row.importance is not None:
        meta.append(f'<span class="importance">importance {row.importance}</span>')
    if row.role is not None:
        meta.append(f'<span class="role">{esc(row.role)}</span>')
    if row.score is not None:
        meta.append(f'<span class="score">score {row.score:.3f}</span>')
    meta.append(support(row))
    pick = ""
    if selectable and not viewer.read_only:
        pick = (
            f'<input type="checkbox" name="ids" value="{esc(row.id)}" id="pick-{esc(row.id)}" '
            f'aria-label="Select {esc(snippet(row.content)[:60])}">'
        )
    return (
        f'<li class="memory t{row.tier}">{pick}<div>'
        f'<a class="text" href="{esc(memory_url(row.id))}">{esc(snippet(row.content))}</a>'
        f'<p class="meta">{" ".join(m for m in meta if m)}</p></div></li>'
    )


def memory_list(
    rows: Sequence[schemas.MemoryRow | schemas.LineageRow],
    viewer: Viewer,
    *,
    empty: str,
    label: str,
    back: str,
) -> str:
    """The rows, in a form that deletes a selection (absent for a read-only key)."""
    if not rows:
        return f'<p class="empty">{esc(empty)}</p>'
    items = "".join(memory_item(r, viewer) for r in rows)
    listing = f'<ul class="memories" aria-label="{esc(label)}">{items}</ul>'
    if viewer.read_only:
        return listing
    return (
        f'<form method="post" action="{PREFIX}/delete" class="selection">{csrf_field(viewer)}'
        f'<input type="hidden" name="back" value="{esc(back)}">{listing}'
        '<button type="submit" class="danger">Delete selected…</button></form>'
    )


# --- overview ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConsolidateNow:
    """How the overview offers to consolidate now. Until the server runs a model of its own,
    the command to run with one's own model (``api_url``: what its ``--api-url`` names, None
    for the default); once it does, ``action`` (the path a "Consolidate now" button posts
    to, with the session's token) takes the command's place."""

    api_url: str | None = None
    action: str | None = None


REFLECT_COMMAND = (
    'mcp-memoryrouter reflect --until-empty --key-file vault.key --model-cmd "claude -p"'
)


def consolidate_now(offer: ConsolidateNow, viewer: Viewer) -> str:
    head = '<div class="card consolidate"><h3 id="consolidate-h">Consolidate now</h3>'
    if offer.action is not None and not viewer.read_only:
        return (
            f'{head}<form method="post" action="{esc(offer.action)}">{csrf_field(viewer)}'
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


def overview(
    stats: schemas.StatsResponse,
    timeline: schemas.TimelineResponse | None,
    viewer: Viewer,
    *,
    notice: str | None = None,
    offer: ConsolidateNow = ConsolidateNow(),
) -> str:
    counts = "".join(
        f'<div class="count t{t}"><dt>Tier {t} · {esc(TIER_NAMES[t])}s</dt>'
        f'<dd data-tier="{t}">{stats.tiers[str(t)].count}</dd>'
        f'<dd class="note">{esc(TIER_HELP[t])}</dd></div>'
        for t in (1, 2, 3)
    )
    debt = stats.reflection
    raw, tier2 = debt.unconsolidated.raw, debt.unconsolidated.tier2
    gauges = gauge(
        "raw-debt",
        "Moments waiting to be consolidated",
        raw.importance_equiv,
        debt.threshold_importance,
        f"{raw.units} moments, about {raw.est_tokens} tokens",
    ) + gauge(
        "tier2-debt",
        "Reflections waiting to be consolidated",
        tier2.importance,
        debt.threshold_importance,
        f"{tier2.count} reflections, about {tier2.est_tokens} tokens",
    )
    suggestion = (
        f'<p class="suggestion" role="status">{esc(debt.suggestion)}</p>'
        if debt.suggestion
        else '<p class="note">No consolidation is due.</p>'
    )
    last = None if timeline is None else timeline.last_reflection_at
    facts = (
        f'<dl class="facts"><dt>Memories</dt><dd id="total">{stats.total_memories}</dd>'
        f"<dt>Tokens</dt><dd>{stats.total_tokens}</dd>"
        f'<dt>Waiting for embedding</dt><dd id="pending">{stats.pending_embeddings}</dd>'
        f"<dt>Oldest</dt><dd>{esc(day(stats.oldest))}</dd>"
        f"<dt>Newest</dt><dd>{esc(day(stats.newest))}</dd>"
        f'<dt>Last consolidation</dt><dd id="last-consolidation">'
        f"{esc(day(last) if last else 'never')}</dd></dl>"
    )
    body = (
        f'<section aria-labelledby="tiers-h"><h2 id="tiers-h">Tiers</h2>'
        f'<dl class="counts">{counts}</dl>{facts}</section>'
        f'<section aria-labelledby="debt-h"><h2 id="debt-h">Reflection debt</h2>'
        f'<p class="note">Consolidation is suggested when either gauge reaches '
        f"{debt.threshold_importance} importance.</p>{gauges}{suggestion}"
        f"{consolidate_now(offer, viewer)}</section>"
        f'<section aria-labelledby="chart-h"><h2 id="chart-h">Memories over time</h2>'
        + (
            chart(timeline)
            if timeline is not None
            else '<p class="empty">This vault\'s API does not count memories over time.</p>'
        )
        + "</section>"
    )
    return page("Overview", body, viewer, current="/", notice=notice)


def gauge(ident: str, label: str, value: int, threshold: int, detail: str) -> str:
    high = max(threshold, value, 1)
    return (
        f'<div class="gauge"><label for="{ident}">{esc(label)}</label>'
        f'<meter id="{ident}" min="0" max="{high}" low="{int(threshold * 0.5)}" '
        f'high="{threshold}" optimum="0" value="{value}">{value} of {threshold}</meter>'
        f'<p class="note"><strong>{value}</strong> of {threshold} importance · {esc(detail)}</p>'
        "</div>"
    )


def chart(timeline: schemas.TimelineResponse) -> str:
    """Stacked bars per bucket (tier 1 at the bottom), as SVG, with the same numbers in a
    table for screen readers and for reading exact values."""
    buckets = timeline.buckets
    if not buckets:
        return '<p class="empty">Nothing remembered yet.</p>'
    filled = fill_gaps(buckets, timeline.bucket)
    peak = max(sum(b.tiers.values()) for b in filled) or 1
    width = max(len(filled) * 12, 240)
    bar = width / len(filled)
    rects = []
    for i, b in enumerate(filled):
        y = float(CHART_HEIGHT)
        for tier in ("1", "2", "3"):
            n = b.tiers.get(tier, 0)
            if not n:
                continue
            h = n / peak * (CHART_HEIGHT - 4)
            y -= h
            rects.append(
                f'<rect class="t{tier}" x="{i * bar + 1:.1f}" y="{y:.1f}" '
                f'width="{max(bar - 2, 1):.1f}" height="{h:.1f}">'
                f"<title>{esc(b.start)}: {n} tier {tier}</title></rect>"
            )
    label = (
        f"Memories per {timeline.bucket} from {filled[0].start} to {filled[-1].start}, "
        f"by tier; at most {peak} in one {timeline.bucket}"
    )
    rows = "".join(
        f'<tr><th scope="row">{esc(b.start)}</th>'
        + "".join(f"<td>{b.tiers.get(t, 0)}</td>" for t in ("1", "2", "3"))
        + "</tr>"
        for b in buckets
    )
    legend = "".join(
        f'<li><span class="swatch t{t}"></span>Tier {t} · {esc(TIER_NAMES[t])}s</li>'
        for t in (1, 2, 3)
    )
    return (
        f'<figure class="chart"><svg viewBox="0 0 {width:.0f} {CHART_HEIGHT}" role="img" '
        f'aria-label="{esc(label)}" preserveAspectRatio="none">{"".join(rects)}</svg>'
        f'<figcaption><ul class="legend">{legend}</ul>'
        f"<span>{esc(filled[0].start)} to {esc(filled[-1].start)}, per {esc(timeline.bucket)}"
        "</span></figcaption></figure>"
        f"<details><summary>The numbers</summary><table><caption>Memories per "
        f'{esc(timeline.bucket)}</caption><thead><tr><th scope="col">From</th>'
        '<th scope="col">Tier 1</th><th scope="col">Tier 2</th><th scope="col">Tier 3</th>'
        f"</tr></thead><tbody>{rows}</tbody></table></details>"
    )


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


# --- search and timeline -------------------------------------------------------------------


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


def filter_fields(f: Filters, *, with_query: bool, with_order: bool) -> str:
    tiers = "".join(
        f'<label class="inline"><input type="checkbox" name="tier" value="{t}"'
        + (" checked" if t in f.tiers else "")
        + f"> Tier {t} · {esc(TIER_NAMES[t])}s</label>"
        for t in (1, 2, 3)
    )
    query = ""
    if with_query:
        query = (
            '<label for="q">Words or a question (leave empty to list by date)</label>'
            f'<input id="q" name="q" type="search" value="{esc(f.query)}" maxlength="2000">'
        )
    importance = "".join(
        f'<option value="{i}"' + (" selected" if f.importance == i else "") + f">{i}+</option>"
        for i in range(1, 11)
    )
    order = ""
    if with_order:
        order = (
            '<label for="order">Order</label><select id="order" name="order">'
            + "".join(
                f'<option value="{v}"' + (" selected" if f.order == v else "") + f">{t}</option>"
                for v, t in (("newest_first", "Newest first"), ("oldest_first", "Oldest first"))
            )
            + "</select>"
        )
    return (
        f"{query}<fieldset><legend>Tiers (none ticked: all)</legend>{tiers}</fieldset>"
        '<div class="row"><div><label for="importance">Reflections of importance</label>'
        f'<select id="importance" name="importance"><option value="">any</option>{importance}'
        "</select></div>"
        f'<div><label for="from">From</label><input id="from" name="from" type="date" '
        f'value="{esc(f.date_from)}"></div>'
        f'<div><label for="to">To</label><input id="to" name="to" type="date" '
        f'value="{esc(f.date_to)}"></div>'
        f"<div>{order}</div></div>"
    )


def search_page(
    f: Filters,
    rows: Sequence[schemas.MemoryRow] | None,
    viewer: Viewer,
    *,
    note: str = "",
    more: str | None = None,
    error: str | None = None,
    notice: str | None = None,
    here: str | None = None,
) -> str:
    """``here``: this page's own address, where a delete started from it comes back to."""
    form = (
        f'<form method="get" action="{PREFIX}/search" class="filters" role="search">'
        f"{filter_fields(f, with_query=True, with_order=False)}"
        '<button type="submit">Search</button></form>'
    )
    results = ""
    if rows is not None:
        results = results_section(
            _count(len(rows), "result", "results"),
            note,
            rows,
            viewer,
            empty="Nothing matches.",
            label="Results",
            back=here or url("/search", **query_of(f)),
            link=f'<a href="{esc(more)}">More results</a>' if more else "",
        )
    return page("Search", form + results, viewer, current="/search", error=error, notice=notice)


def timeline_page(
    f: Filters,
    result: schemas.DateSearchResponse | None,
    viewer: Viewer,
    *,
    next_page: str | None,
    error: str | None = None,
    notice: str | None = None,
    here: str | None = None,
) -> str:
    """``here``: this page's own address (its cursor too), where a delete comes back to."""
    form = (
        f'<form method="get" action="{PREFIX}/timeline" class="filters">'
        f"{filter_fields(f, with_query=False, with_order=True)}"
        '<button type="submit">Show</button></form>'
    )
    results = ""
    if result is not None:
        results = results_section(
            _count(len(result.memories), "memory", "memories"),
            page_span(result.memories) + ORDER_NOTES[f.order] if result.memories else "",
            result.memories,
            viewer,
            empty="Nothing in this window.",
            label="Memories",
            back=here or url("/timeline", **query_of(f)),
            link=f'<a rel="next" href="{esc(next_page)}">Next page</a>' if next_page else "",
        )
    return page("Timeline", form + results, viewer, current="/timeline", error=error, notice=notice)


# How a date window is ordered, said where it is shown: date-search places a reflection at
# the start of its coverage newest first and at its end oldest first (docs/api.md), so in
# both orders it follows the moments it was built from.
ORDER_NOTES = {
    "newest_first": " Newest first; a reflection stands at the start of the time it covers, "
    "after the moments it was built from.",
    "oldest_first": " Oldest first; a reflection stands at the end of the time it covers, "
    "after the moments it was built from.",
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


def results_section(
    heading: str,
    note: str,
    rows: Sequence[schemas.MemoryRow],
    viewer: Viewer,
    *,
    empty: str,
    label: str,
    back: str,
    link: str,
) -> str:
    """A page of rows under its count, with a note and a link to more (search, timeline)."""
    return (
        f'<section aria-labelledby="results-h"><h2 id="results-h">{esc(heading)}</h2>'
        + (f'<p class="note">{esc(note)}</p>' if note else "")
        + memory_list(rows, viewer, empty=empty, label=label, back=back)
        + (f"<p>{link}</p>" if link else "")
        + "</section>"
    )


def query_of(f: Filters) -> dict[str, object]:
    return {
        "q": f.query,
        "tier": list(f.tiers),
        "importance": f.importance,
        "from": f.date_from,
        "to": f.date_to,
        "order": f.order if f.order != "newest_first" else None,
    }


# --- a memory ---------------------------------------------------------------------------------


def memory_page(
    found: schemas.InspectResponse,
    viewer: Viewer,
    *,
    next_offset: str | None,
    back: str = PREFIX,
    notice: str | None = None,
    corrections: str = "",
) -> str:
    """``back``: where the person goes once this memory is deleted (the page they came
    from, else its parent)."""
    facts = [tier_tag(found.tier)]
    if found.covers is not None:
        facts.append(covering(found.covers))
    else:
        facts.append(f'<time datetime="{esc(found.date)}">{esc(day(found.date))}</time>')
    if found.importance is not None:
        facts.append(f'<span class="importance">importance {found.importance}</span>')
    if found.role is not None:
        facts.append(f'<span class="role">{esc(found.role)}</span>')
    body = (
        f'<article class="memory-page t{found.tier}"><p class="meta">{" ".join(facts)}</p>'
        f'<blockquote class="content">{esc(found.content)}</blockquote>'
        f'<p class="note">id <code>{esc(found.memory_id)}</code></p></article>'
        f"{corrections}"
    )
    up = found.consolidated_into or []
    body += '<section aria-labelledby="up-h"><h2 id="up-h">Up: built from this</h2>'
    if up:
        body += (
            '<ul class="memories" aria-label="Built from this">'
            + "".join(memory_item(r, viewer, selectable=False) for r in up)
            + "</ul>"
        )
    else:
        body += (
            '<p class="empty">No reflection is built from this yet'
            + (" (a tier-3 reflection is the top)." if found.tier == 3 else ".")
            + "</p>"
        )
    body += "</section>"
    if found.tier > 1:
        body += (
            '<section aria-labelledby="down-h"><h2 id="down-h">Down: what this was built from'
            f'</h2><p class="note" id="sources-summary">'
            f"{esc(sources_summary(found, paged=next_offset is not None))}</p>"
            '<ul class="memories" aria-label="Sources">'
            + "".join(memory_item(r, viewer, selectable=False) for r in found.sources or [])
            + "</ul>"
            + (
                f'<p><a rel="next" href="{esc(next_offset)}">More sources</a></p>'
                if next_offset
                else ""
            )
            + "</section>"
        )
    if not viewer.read_only:
        body += (
            f'<form method="post" action="{PREFIX}/delete" class="actions">{csrf_field(viewer)}'
            f'<input type="hidden" name="ids" value="{esc(found.memory_id)}">'
            f'<input type="hidden" name="back" value="{esc(back)}">'
            f'<input type="hidden" name="cancel" value="{esc(memory_url(found.memory_id))}">'
            f'<a class="button" href="{esc(memory_url(found.memory_id))}/correct">'
            "Correct this memory…</a>"
            '<button type="submit" class="danger">Delete this memory…</button></form>'
        )
    return page(f"Tier {found.tier} {TIER_NAMES[found.tier]}", body, viewer, notice=notice)


def sources_summary(found: schemas.InspectResponse, *, paged: bool) -> str:
    """How many sources a reflection was built from, how many are gone, and which of those
    left the page lists."""
    total, deleted = found.sources_total or 0, found.sources_deleted or 0
    offset, shown = found.offset or 0, len(found.sources or [])
    summary = _count(total, "source", "sources")
    if deleted:
        summary += f", {deleted} of them deleted"
    if found.orphaned:
        return summary + ": every source is gone, this reflection stands alone."
    if not shown:
        return summary + "."
    if paged or offset:
        listed = f"Listed below: {offset + 1} to {offset + shown} of the {total - deleted}"
        return f"{summary}. {listed}, most similar first."
    if shown == 1:
        return f"{summary}. {'The one left' if deleted else 'It'} is listed below."
    listed = f"The {shown} left are" if deleted else f"All {shown} are"
    return f"{summary}. {listed} listed below, most similar first."


# --- tidy -------------------------------------------------------------------------------------


def confirm_delete(
    ids: Sequence[str],
    alone: schemas.DeleteIdsResponse | None,
    derived: schemas.DeleteIdsResponse | None,
    viewer: Viewer,
    back: str,
    cancel: str | None = None,
) -> str:
    """What deleting the selection does, from two dry runs: the selection alone, and the
    selection with every reflection built from it (None: the vault cannot dry-run).
    ``back``: where the person lands once it is done; ``cancel``: where Cancel goes (the
    page the delete was started from; default ``back``)."""
    gone = 0 if alone is None else alone.not_found
    found = len(ids) - gone
    by_tier = {} if derived is None else derived.by_tier or {}
    above = sum(len(v) for t, v in by_tier.items() if t != "1") - sum(
        len(v) for t, v in ({} if alone is None else alone.by_tier or {}).items() if t != "1"
    )
    pool = {} if derived is None else derived.returned_to_pool or {}
    freed = sum(pool.values())
    hidden = "".join(f'<input type="hidden" name="ids" value="{esc(i)}">' for i in ids)
    common = f'{csrf_field(viewer)}{hidden}<input type="hidden" name="back" value="{esc(back)}">'
    if cancel:
        common += f'<input type="hidden" name="cancel" value="{esc(cancel)}">'
    missing = f" ({gone} of them no longer exist{'s' if gone == 1 else ''})" if gone else ""
    effects = (
        f"<p>You selected {_count(len(ids), 'memory', 'memories')}{missing}.</p><ul>"
        "<li><strong>Delete only these:</strong> they are gone for good. A reflection built "
        "from a deleted memory keeps its text and counts the source as deleted; when all of "
        "its sources are gone it is marked orphaned. A reflection you delete this way leaves "
        "its own sources as they are: consolidated, so no later consolidation rebuilds it."
        "</li>"
    )
    offer = derived is None or above > 0 or freed > 0
    if derived is None:
        effects += (
            "<li><strong>Also delete what was built from them:</strong> every reflection "
            "above goes too, and their other sources return to the unconsolidated pool. This "
            "vault cannot say in advance how many.</li>"
        )
    elif offer:
        returned = ", ".join(f"{n} at tier {t}" for t, n in sorted(pool.items()) if n)
        parts = []
        if above:
            parts.append(f"{_count(above, 'reflection', 'reflections')} built from them go too")
        if returned:
            parts.append(
                f"{_count(freed, 'source', 'sources')} ({esc(returned)}) return to the "
                "unconsolidated pool, so the next consolidation rebuilds without what you "
                "deleted"
            )
        effects += (
            "<li><strong>Also delete what was built from them:</strong> "
            + "; ".join(parts)
            + ".</li>"
        )
    effects += "</ul>"
    listing = "".join(
        f"<li>{tier_tag(int(t))} <code>{esc(i)}</code></li>"
        for t, group in sorted(by_tier.items())
        for i in group
    )
    if derived is None or above == 0:
        derived_label = "Delete these and free their sources"
    else:
        derived_label = (
            f"Delete these and the {_count(above, 'reflection', 'reflections')} built from them"
        )
    buttons = (
        f'<form method="post" action="{PREFIX}/delete/confirm" class="actions">{common}'
        f'<button type="submit" class="danger" name="derived" value="no">Delete only these '
        f"({found})</button>"
        + (
            f'<button type="submit" class="danger" name="derived" value="yes">'
            f"{esc(derived_label)}</button>"
            if offer
            else ""
        )
        + f'<a class="button" href="{esc(cancel or back)}">Cancel</a></form>'
    )
    body = (
        f'<div class="card">{effects}</div>'
        + (
            "<details><summary>What goes with the reflections built from them</summary>"
            f'<ul class="plain">{listing}</ul></details>'
            if listing and above
            else ""
        )
        + buttons
    )
    return page("Delete memories?", body, viewer)


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def problem(title: str, message: str, viewer: Viewer | None, *, back: str | None = None) -> str:
    link = f'<p><a href="{esc(back)}">Go back</a></p>' if back else ""
    return page(title, f'<p class="error" role="alert">{esc(message)}</p>{link}', viewer)
