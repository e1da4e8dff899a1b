"""The search and timeline pages' HTML: the filters' form, and a page of rows under its count.
Pure functions; the forms' values are :class:`.views.Filters`."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memoryrouter import schemas
from mcp_memoryrouter.pages.document import esc
from mcp_memoryrouter.ui.render import PREFIX, TIER_NAMES, Viewer, memory_list, page, url
from mcp_memoryrouter.ui.views import Filters, count, page_span, query_of

ORDERS = (("newest_first", "Newest first"), ("oldest_first", "Oldest first"))
# How a date window is ordered, said where it is shown: date-search places a reflection at
# the start of its coverage newest first and at its end oldest first (docs/api.md), so in
# both orders it follows the moments it was built from.
ORDER_NOTES = {
    "newest_first": " Newest first; a reflection stands at the start of the time it covers, "
    "after the moments it was built from.",
    "oldest_first": " Oldest first; a reflection stands at the end of the time it covers, "
    "after the moments it was built from.",
}


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
            count(len(rows), "result", "results"),
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
            count(len(result.memories), "memory", "memories"),
            page_span(result.memories) + ORDER_NOTES[f.order] if result.memories else "",
            result.memories,
            viewer,
            empty="Nothing in this window.",
            label="Memories",
            back=here or url("/timeline", **query_of(f)),
            link=f'<a rel="next" href="{esc(next_page)}">Next page</a>' if next_page else "",
        )
    return page("Timeline", form + results, viewer, current="/timeline", error=error, notice=notice)


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


def filter_fields(f: Filters, *, with_query: bool, with_order: bool) -> str:
    query = ""
    if with_query:
        query = (
            '<label for="q">Words or a question (leave empty to list by date)</label>'
            f'<input id="q" name="q" type="search" value="{esc(f.query)}" maxlength="2000">'
        )
    return (
        f"{query}<fieldset><legend>Tiers (none ticked: all)</legend>{tier_boxes(f)}</fieldset>"
        '<div class="row"><div><label for="importance">Reflections of importance</label>'
        f'<select id="importance" name="importance"><option value="">any</option>'
        f"{importance_options(f)}</select></div>"
        f'<div><label for="from">From</label><input id="from" name="from" type="date" '
        f'value="{esc(f.date_from)}"></div>'
        f'<div><label for="to">To</label><input id="to" name="to" type="date" '
        f'value="{esc(f.date_to)}"></div>'
        f"<div>{order_select(f) if with_order else ''}</div></div>"
    )


def tier_boxes(f: Filters) -> str:
    return "".join(
        f'<label class="inline"><input type="checkbox" name="tier" value="{t}"'
        + (" checked" if t in f.tiers else "")
        + f"> Tier {t} · {esc(TIER_NAMES[t])}s</label>"
        for t in (1, 2, 3)
    )


def importance_options(f: Filters) -> str:
    return "".join(
        f'<option value="{i}"' + (" selected" if f.importance == i else "") + f">{i}+</option>"
        for i in range(1, 11)
    )


def order_select(f: Filters) -> str:
    return (
        '<label for="order">Order</label><select id="order" name="order">'
        + "".join(
            f'<option value="{v}"' + (" selected" if f.order == v else "") + f">{t}</option>"
            for v, t in ORDERS
        )
        + "</select>"
    )
