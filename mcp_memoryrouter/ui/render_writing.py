"""The HTML of the pages that store a memory: add one, correct one. Pure functions, no I/O.

A correction is a new memory: its text begins with what it corrects, in words (a date and
the start of the earlier text, never an id, which never reaches a model), so that whoever
reads it later, a model or a person, knows it replaces something; the earlier memory stays
as it was and its page links to the correction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mcp_memoryrouter import limits, schemas
from mcp_memoryrouter.pages.document import esc
from mcp_memoryrouter.ui.render import (
    PREFIX,
    TIER_NAMES,
    Viewer,
    csrf_field,
    memory_item,
    memory_url,
    page,
)
from mcp_memoryrouter.ui.views import day

ROLES = (
    ("user", "Something you said or know (user)"),
    ("assistant", "Something an assistant said (assistant)"),
    ("observation", "Something observed (observation)"),
)
QUOTE_CHARS = 120  # of the earlier text, in a correction's first words


@dataclass(frozen=True)
class Draft:
    """What the add form holds: as typed, so a refused form comes back filled in."""

    text: str = ""
    role: str = "user"
    date: str = ""


def add_page(viewer: Viewer, draft: Draft = Draft(), *, error: str | None = None) -> str:
    roles = "".join(
        f'<option value="{value}"' + (" selected" if draft.role == value else "") + f">"
        f"{esc(words)}</option>"
        for value, words in ROLES
    )
    body = (
        "<p>Store a memory by hand, as a connected app would: it is a moment (tier 1), "
        "found by search at once and consolidated with the others.</p>"
        f'<form method="post" action="{PREFIX}/add" class="card">{csrf_field(viewer)}'
        '<label for="text">What to remember</label>'
        f'<textarea id="text" name="text" rows="6" required '
        f'maxlength="{limits.UI_MEMORY_MAX_CHARS}">{esc(draft.text)}</textarea>'
        '<div class="row"><div><label for="role">Whose words</label>'
        f'<select id="role" name="role">{roles}</select></div>'
        '<div><label for="date">When (empty: now)</label>'
        f'<input id="date" name="date" type="date" value="{esc(draft.date)}"></div></div>'
        '<button type="submit">Store the memory</button></form>'
    )
    return page("Add a memory", body, viewer, current="/add", error=error)


def correct_page(
    found: schemas.InspectResponse,
    viewer: Viewer,
    *,
    today: str,
    text: str | None = None,
    error: str | None = None,
) -> str:
    """The form that corrects ``found``: the earlier text, and a field for what is right
    (filled with the earlier text to edit, when it fits the field). ``today``: the date the
    correction is made (UTC)."""
    if text is None:
        text = found.content if len(found.content) <= limits.UI_MEMORY_MAX_CHARS else ""
    target = memory_url(found.memory_id)
    body = (
        f'<article class="memory-page t{found.tier}"><p class="meta">Tier {found.tier} · '
        f"{esc(TIER_NAMES[found.tier])} · {esc(day(when_of(found)))}</p>"
        f'<blockquote class="content">{esc(found.content)}</blockquote></article>'
        "<p>Nothing is edited in place: the correction is stored as a new memory that says "
        "what it corrects, and this memory's page links to it. Delete this one too if it "
        "should not be found any more.</p>"
        f'<form method="post" action="{esc(target)}/correct" class="card">{csrf_field(viewer)}'
        '<label for="text">What is right</label>'
        f'<textarea id="text" name="text" rows="6" required '
        f'maxlength="{limits.UI_MEMORY_MAX_CHARS}">{esc(text)}</textarea>'
        '<p class="note">It is stored beginning &ldquo;'
        f"{esc(correction_opening(found, today))}&rdquo;, dated as the memory it "
        "corrects, so a question about that time finds both.</p>"
        '<button type="submit">Store the correction</button>'
        f'<a class="button" href="{esc(target)}">Cancel</a></form>'
    )
    return page("Correct a memory", body, viewer, error=error)


def when_of(found: schemas.InspectResponse) -> str:
    """The instant a memory stands for: a moment's date, the end of a reflection's cover."""
    return found.covers.to if found.covers is not None else found.date


def correction_opening(found: schemas.InspectResponse, today: str) -> str:
    quoted = " ".join(found.content.split())
    if len(quoted) > QUOTE_CHARS:
        quoted = quoted[: QUOTE_CHARS - 1].rstrip() + "…"
    return f'Correction, made {today}, of the earlier memory "{quoted}":'


def correction_text(found: schemas.InspectResponse, text: str, today: str) -> str:
    """What a correction stores: what it corrects, in words, then what is right."""
    return f"{correction_opening(found, today)} {text.strip()}"


def corrections_section(
    corrected_by: Sequence[schemas.InspectResponse],
    corrects: Sequence[schemas.InspectResponse],
    viewer: Viewer,
) -> str:
    """On a memory's page: the corrections stored for it, and what it corrects."""
    out = ""
    if corrected_by:
        out += (
            '<section aria-labelledby="corrected-h"><h2 id="corrected-h">Corrected by</h2>'
            '<p class="note">Stored later as corrections of this memory, newest first.</p>'
            f'<ul class="memories" aria-label="Corrected by">{_items(corrected_by, viewer)}'
            "</ul></section>"
        )
    if corrects:
        out += (
            '<section aria-labelledby="corrects-h"><h2 id="corrects-h">Corrects</h2>'
            f'<ul class="memories" aria-label="Corrects">{_items(corrects, viewer)}</ul>'
            "</section>"
        )
    return out


def _items(found: Sequence[schemas.InspectResponse], viewer: Viewer) -> str:
    return "".join(memory_item(_row(f), viewer, selectable=False) for f in found)


def _row(found: schemas.InspectResponse) -> schemas.MemoryRow:
    return schemas.MemoryRow(
        id=found.memory_id,
        tier=found.tier,
        content=found.content,
        date=None if found.covers is not None else found.date,
        covers=found.covers,
        role=found.role,
        importance=found.importance,
        sources_total=found.sources_total,
        sources_deleted=found.sources_deleted,
        orphaned=found.orphaned,
    )
