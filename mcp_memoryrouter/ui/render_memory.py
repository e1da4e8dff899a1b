"""A memory's page (what it says, what was built from it, what it was built from) and the
confirmation of a delete. Pure functions; the sources' summary and what a delete takes are
worked out before, in :mod:`.views`."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memoryrouter import schemas
from mcp_memoryrouter.pages.document import esc
from mcp_memoryrouter.ui.render import (
    PREFIX,
    TIER_NAMES,
    Viewer,
    covering,
    csrf_field,
    currency_tags,
    memory_item,
    memory_url,
    page,
    tier_tag,
)
from mcp_memoryrouter.ui.views import DeletePlan, count, day, delete_plan, sources_summary
from mcp_memoryrouter.words import counted

ONLY_THESE = (
    "<li><strong>Delete only these:</strong> they are gone for good. A reflection built "
    "from a deleted memory keeps its text and counts the source as deleted; when all of "
    "its sources are gone it is marked orphaned. A reflection you delete this way leaves "
    "its own sources as they are: consolidated, so no later consolidation rebuilds it.</li>"
)
UNKNOWN_DERIVED = (
    "<li><strong>Also delete what was built from them:</strong> every reflection "
    "above goes too, and their other sources return to the unconsolidated pool. This "
    "vault cannot say in advance how many.</li>"
)


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
    body = (
        f'<article class="memory-page t{found.tier}"><p class="meta">{facts(found)}</p>'
        f'<blockquote class="content">{esc(found.content)}</blockquote>{replaced_note(found)}'
        f'<p class="note">id <code>{esc(found.memory_id)}</code></p>'
        f"{stored_by_note(found.stored_by)}{weak_note(found)}</article>"
        f"{corrections}{replaced_section(found, viewer)}{up_section(found, viewer)}"
    )
    if found.tier > 1:
        body += down_section(found, viewer, next_offset)
    if not viewer.read_only:
        body += actions(found, viewer, back)
    return page(f"Tier {found.tier} {TIER_NAMES[found.tier]}", body, viewer, notice=notice)


def facts(found: schemas.InspectResponse) -> str:
    parts = [tier_tag(found.tier), currency_tags(found)]
    if found.covers is not None:
        parts.append(covering(found.covers))
    else:
        parts.append(f'<time datetime="{esc(found.date)}">{esc(day(found.date))}</time>')
    if found.importance is not None:
        parts.append(f'<span class="importance">importance {found.importance}</span>')
    if found.role is not None:
        parts.append(f'<span class="role">{esc(found.role)}</span>')
    return " ".join(p for p in parts if p)


# How the page names each surface a memory came through (schemas.SURFACES).
SURFACE_NAMES: dict[schemas.Surface, str] = {
    "rest": "the REST API",
    "mcp": "an MCP tool",
    "proxy": "the chat proxy",
    "explorer": "this explorer",
    "import": "an import",
    "consolidator": "a consolidation loop",
    "reflector": "the server's reflector",
}


def weak_note(found: schemas.InspectResponse) -> str:
    """A reflection no source of its batch supported well when it was committed."""
    if not found.weak_support:
        return ""
    return (
        '<p class="note weak-support">Weakly supported: no memory it was built from says '
        "much of this. Check it against its sources below.</p>"
    )


def stored_by_note(stored_by: schemas.StoredBy | None) -> str:
    """Where the memory came from: the surface, the client it named, the key."""
    if stored_by is None:
        return (
            '<p class="note stored-by">Stored before this vault kept where memories came from.</p>'
        )
    client = "" if stored_by.client is None else f" ({esc(stored_by.client)})"
    name = "" if stored_by.key_name is None else f"{esc(stored_by.key_name)}, "
    return (
        f'<p class="note stored-by">Stored through {SURFACE_NAMES[stored_by.surface]}{client} '
        f"with the key {name}<code>{esc(stored_by.key_id)}</code></p>"
    )


def replaced_note(found: schemas.InspectResponse) -> str:
    """A reflection a later one replaced: when, and a link to the one that replaced it."""
    if found.superseded is None:
        return ""
    at, by = found.superseded.at, found.superseded.by
    return (
        '<p class="replaced-by" id="replaced-by"><strong>No longer current.</strong> Replaced '
        f'on <time datetime="{esc(at)}">{esc(at[:10])}</time> by '
        f'<a href="{esc(memory_url(by))}">the newer reflection</a>. It stays here with its '
        "sources; search and prepare put the newer one first.</p>"
    )


def replaced_section(found: schemas.InspectResponse, viewer: Viewer) -> str:
    """The earlier reflections this one replaced (nothing when it replaced none)."""
    if not found.replaced:
        return ""
    items = "".join(memory_item(r, viewer, selectable=False) for r in found.replaced)
    what = counted(len(found.replaced), "earlier reflection", "earlier reflections")
    return (
        '<section aria-labelledby="replaced-h"><h2 id="replaced-h">What this replaced</h2>'
        f'<p class="note">This reflection replaced {esc(what)}: it is what is true now.</p>'
        f'<ul class="memories" aria-label="Replaced by this">{items}</ul></section>'
    )


def up_section(found: schemas.InspectResponse, viewer: Viewer) -> str:
    """The reflections built from this memory."""
    up = found.consolidated_into or []
    if up:
        listed = (
            '<ul class="memories" aria-label="Built from this">'
            + "".join(memory_item(r, viewer, selectable=False) for r in up)
            + "</ul>"
        )
    else:
        top = " (a tier-3 reflection is the top)." if found.tier == 3 else "."
        listed = f'<p class="empty">No reflection is built from this yet{top}</p>'
    return (
        f'<section aria-labelledby="up-h"><h2 id="up-h">Up: built from this</h2>{listed}</section>'
    )


def down_section(found: schemas.InspectResponse, viewer: Viewer, next_offset: str | None) -> str:
    """What a reflection was built from, a page of its sources at a time."""
    sources = "".join(memory_item(r, viewer, selectable=False) for r in found.sources or [])
    more = f'<p><a rel="next" href="{esc(next_offset)}">More sources</a></p>' if next_offset else ""
    return (
        '<section aria-labelledby="down-h"><h2 id="down-h">Down: what this was built from'
        f'</h2><p class="note" id="sources-summary">'
        f"{esc(sources_summary(found, paged=next_offset is not None))}</p>"
        f'<ul class="memories" aria-label="Sources">{sources}</ul>{more}</section>'
    )


def actions(found: schemas.InspectResponse, viewer: Viewer, back: str) -> str:
    here = esc(memory_url(found.memory_id))
    return (
        f'<form method="post" action="{PREFIX}/delete" class="actions">{csrf_field(viewer)}'
        f'<input type="hidden" name="ids" value="{esc(found.memory_id)}">'
        f'<input type="hidden" name="back" value="{esc(back)}">'
        f'<input type="hidden" name="cancel" value="{here}">'
        f'<a class="button" href="{here}/correct">Correct this memory…</a>'
        '<button type="submit" class="danger">Delete this memory…</button></form>'
    )


# --- a delete ---------------------------------------------------------------------------------


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
    plan = delete_plan(ids, alone, derived)
    body = (
        f'<div class="card">{effects(plan)}</div>'
        + taken(plan)
        + delete_buttons(plan, ids, viewer, back, cancel)
    )
    return page("Delete memories?", body, viewer)


def effects(plan: DeletePlan) -> str:
    missing = ""
    if plan.gone:
        missing = f" ({plan.gone} of them no longer exist{'s' if plan.gone == 1 else ''})"
    return (
        f"<p>You selected {count(plan.selected, 'memory', 'memories')}{missing}.</p><ul>"
        f"{ONLY_THESE}{derived_effect(plan)}</ul>"
    )


def derived_effect(plan: DeletePlan) -> str:
    """What also deleting what was built from the selection does (nothing to say when it
    would take no more than the selection)."""
    if not plan.known:
        return UNKNOWN_DERIVED
    if not plan.offer_derived:
        return ""
    parts = []
    if plan.above:
        parts.append(f"{count(plan.above, 'reflection', 'reflections')} built from them go too")
    if plan.returned:
        returned = ", ".join(f"{n} at tier {t}" for t, n in plan.returned)
        parts.append(
            f"{count(plan.freed, 'source', 'sources')} ({esc(returned)}) return to the "
            "unconsolidated pool, so the next consolidation rebuilds without what you "
            "deleted"
        )
    by_evidence = ""
    if plan.offer_evidence and plan.by_evidence is not None:
        by_evidence = (
            "<li><strong>Or only the reflections their evidence supports:</strong> "
            f"{count(plan.by_evidence, 'reflection', 'reflections')} whose own evidence "
            "includes them go; the other reflections of their batches stay.</li>"
        )
    return (
        "<li><strong>Also delete what was built from them:</strong> "
        + "; ".join(parts)
        + f".</li>{by_evidence}"
    )


def taken(plan: DeletePlan) -> str:
    """The reflections a derived delete takes with the selection, listed."""
    if not (plan.listing and plan.above):
        return ""
    listing = "".join(f"<li>{tier_tag(t)} <code>{esc(i)}</code></li>" for t, i in plan.listing)
    return (
        "<details><summary>What goes with the reflections built from them</summary>"
        f'<ul class="plain">{listing}</ul></details>'
    )


def delete_buttons(
    plan: DeletePlan, ids: Sequence[str], viewer: Viewer, back: str, cancel: str | None
) -> str:
    hidden = "".join(f'<input type="hidden" name="ids" value="{esc(i)}">' for i in ids)
    carried = f'{csrf_field(viewer)}{hidden}<input type="hidden" name="back" value="{esc(back)}">'
    if cancel:
        carried += f'<input type="hidden" name="cancel" value="{esc(cancel)}">'
    if not plan.known or plan.above == 0:
        label = "Delete these and free their sources"
    else:
        label = (
            f"Delete these and the {count(plan.above, 'reflection', 'reflections')} built from them"
        )
    derived = (
        f'<button type="submit" class="danger" name="derived" value="yes">{esc(label)}</button>'
        if plan.offer_derived
        else ""
    )
    if plan.offer_evidence and plan.by_evidence is not None:
        supported = count(plan.by_evidence, "reflection", "reflections")
        derived += (
            '<button type="submit" class="danger" name="derived" value="evidence">'
            f"Delete these and the {supported} their evidence supports</button>"
        )
    return (
        f'<form method="post" action="{PREFIX}/delete/confirm" class="actions">{carried}'
        f'<button type="submit" class="danger" name="derived" value="no">Delete only these '
        f"({plan.found})</button>{derived}"
        f'<a class="button" href="{esc(cancel or back)}">Cancel</a></form>'
    )
