"""The explorer's frame and the pieces its pages share, and the sign-in pages: pure functions
from what a page says to its HTML, no I/O.

Every page stands in the one skeleton (``pages.document``); every value that reaches a page
goes through ``esc``; what a page computes (counts, the chart, the gauges) is worked out
before, in :mod:`.views`. Pages carry no inline script and no inline style (the
Content-Security-Policy forbids both); the one stylesheet and the one script are served by
the explorer itself. The pages themselves: ``render_overview``, ``render_search``,
``render_memory``, ``render_writing``, ``render_tidy``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from mcp_memoryrouter import schemas
from mcp_memoryrouter.pages.document import alert, document, esc, status
from mcp_memoryrouter.ui.views import day

PREFIX = "/ui"
SITE = "Memory explorer"
TIER_NAMES = {1: "moment", 2: "reflection", 3: "high-level reflection"}
TIER_HELP = {
    1: "what was said, as it was said",
    2: "what happened, consolidated from moments",
    3: "why it matters, consolidated from reflections",
}
SNIPPET_CHARS = 280
NAV = [
    ("/", "Overview"),
    ("/search", "Search"),
    ("/timeline", "Timeline"),
    ("/add", "Add"),
    ("/tidy", "Tidy"),
]
WRITERS_ONLY = {"/add"}  # a read-only key's pages do not offer these


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


# --- the frame --------------------------------------------------------------------------------


def page(
    title: str,
    body: str,
    viewer: Viewer | None = None,
    *,
    current: str = "",
    notice: str | None = None,
    error: str | None = None,
) -> str:
    flash = (status(notice) if notice else "") + (alert(error) if error else "")
    return document(
        title,
        flash + body,
        site=SITE,
        stylesheet_url=f"{PREFIX}/static/explorer.css",
        script_url=f"{PREFIX}/static/explorer.js",
        header="" if viewer is None else top(viewer, current),
        footer='<footer><p class="note">Times are UTC.</p></footer>',
    )


def top(viewer: Viewer, current: str) -> str:
    """The bar above a signed-in page: the pages, the vault, and Sign out."""
    links = "".join(
        f'<li><a href="{esc(PREFIX + path if path != "/" else PREFIX)}"'
        + (' aria-current="page"' if path == current else "")
        + f">{esc(label)}</a></li>"
        for path, label in NAV
        if not (viewer.read_only and path in WRITERS_ONLY)
    )
    mode = " · read-only key" if viewer.read_only else ""
    return (
        '<header class="top"><nav aria-label="Explorer"><ul>'
        f"{links}</ul></nav>"
        f'<p class="who">Vault <code>{esc(viewer.vault_ref)}</code>{esc(mode)}</p>'
        f'<form method="post" action="{PREFIX}/sign-out" class="signout">'
        f'{csrf_field(viewer)}<button type="submit">Sign out</button></form></header>'
    )


def csrf_field(viewer: Viewer) -> str:
    return f'<input type="hidden" name="csrf" value="{esc(viewer.csrf)}">'


def problem(title: str, message: str, viewer: Viewer | None, *, back: str | None = None) -> str:
    link = f'<p><a href="{esc(back)}">Go back</a></p>' if back else ""
    return page(title, f"{alert(message)}{link}", viewer)


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
        body = provider_buttons(providers, next_path)
    else:
        body = key_form(token, needs_key=needs_key, next_path=next_path)
    return page("Sign in", body, notice=notice, error=error)


def provider_buttons(providers: Sequence[tuple[str, str]], next_path: str) -> str:
    # links, not forms: the page's form-action 'self' would stop a form's redirect to the
    # provider; starting a sign-in changes nothing until the provider says who it is
    links = [(url("/sign-in/provider", provider=key, next=next_path), n) for key, n in providers]
    buttons = "".join(
        f'<p><a class="button" href="{esc(link)}">Continue with {esc(name)}</a></p>'
        for link, name in links
    )
    return (
        f'<div class="card">{buttons}'
        '<p class="note">Sign in as you do when you connect an app to this server: the '
        "vault made for you at your first sign-in opens. This browser keeps only a session "
        "cookie.</p></div>"
    )


def key_form(token: str, *, needs_key: bool, next_path: str) -> str:
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
    return (
        f'<form method="post" action="{PREFIX}/sign-in" class="card">'
        f'<input type="hidden" name="csrf" value="{esc(token)}">'
        f'<input type="hidden" name="next" value="{esc(next_path)}">{field}'
        f'<button type="submit">{action}</button></form>'
    )


def signed_in(next_path: str) -> str:
    """Where the identity provider's sign-in lands: on to ``next_path`` from this page, so
    the browser sends the explorer's same-site cookie with the next request (a redirect
    straight from the provider's cross-site navigation would not)."""
    target = esc(next_path)
    body = f'<p><a class="button" href="{target}">Open the explorer</a></p>'
    made = page("Signed in", body)
    return made.replace("<head>", f'<head><meta http-equiv="refresh" content="0;url={target}">', 1)


def sign_in_notice(message: str) -> str:
    """A refusal that needs a new sign-in (a form sent after its session ended)."""
    body = f'<p><a class="button" href="{PREFIX}/sign-in">Sign in</a></p>'
    return page("Signed out", body, error=message)


# --- pieces -----------------------------------------------------------------------------------


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


def meta(row: schemas.MemoryRow | schemas.LineageRow) -> str:
    """A row's tier (and whether it was replaced, or is a preference), time, importance,
    role, score and support, as one line."""
    parts = [tier_tag(row.tier), currency_tags(row), when(row)]
    if row.importance is not None:
        parts.append(f'<span class="importance">importance {row.importance}</span>')
    if row.role is not None:
        parts.append(f'<span class="role">{esc(row.role)}</span>')
    if row.score is not None:
        parts.append(f'<span class="score">score {row.score:.3f}</span>')
    if isinstance(row, schemas.LineageRow) and row.evidence is not None:
        mark = row.evidence
        cited = ", cited" if mark.cited else ""
        parts.append(f'<span class="evidence">evidence {mark.score:.3f}{cited}</span>')
    parts.append(support(row))
    return " ".join(m for m in parts if m)


def currency_tags(
    row: schemas.MemoryRow | schemas.LineageRow | schemas.InspectResponse,
) -> str:
    """A "replaced" badge on a reflection a later one replaced (with the day), a
    "preference" badge on a standing preference; nothing on a current fact."""
    tags = []
    if row.superseded is not None:
        at = row.superseded.at
        tags.append(
            f'<span class="tag replaced">replaced on <time datetime="{esc(at)}">'
            f"{esc(at[:10])}</time></span>"
        )
    if row.kind == "preference":
        tags.append('<span class="tag preference">preference</span>')
    return " ".join(tags)


def memory_item(
    row: schemas.MemoryRow | schemas.LineageRow, viewer: Viewer, *, selectable: bool = True
) -> str:
    pick = ""
    if selectable and not viewer.read_only:
        pick = (
            f'<input type="checkbox" name="ids" value="{esc(row.id)}" id="pick-{esc(row.id)}" '
            f'aria-label="Select {esc(snippet(row.content)[:60])}">'
        )
    replaced = " replaced" if row.superseded is not None else ""
    return (
        f'<li class="memory t{row.tier}{replaced}">{pick}<div>'
        f'<a class="text" href="{esc(memory_url(row.id))}">{esc(snippet(row.content))}</a>'
        f'<p class="meta">{meta(row)}</p></div></li>'
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
