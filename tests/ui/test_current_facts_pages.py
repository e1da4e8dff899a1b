"""Facts that stay current, as a person sees them in the explorer: a replaced reflection's page
says when and by what it was replaced, the newer one's page what it replaced; search rows
mark replaced reflections and standing preferences; the overview lists the current standing
preferences, most important first, and nothing when there are none. In a real browser too:
axe-core finds no serious violation on those pages and nothing scrolls sideways on a phone."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx2
import pytest
from playwright.sync_api import BrowserContext

from tests.support.oauth import OAuthServer
from tests.support.ui import (
    DESKTOP,
    PHONE,
    api,
    axe_violations,
    dumps,
    needs_browser,
    shoot,
    sign_in,
    signed_in,
)

BOSTON = "Ana lives in Boston, in a flat near the harbour, with her two cats."
DENVER = "Ana moved from Boston to Denver in June 2026; the two cats came along."
METRIC = "Always give distances and weights in metric units."
MILES = "Give running distances in miles; other measures in metric units."
VEGETARIAN = "Ana is vegetarian: plan every shared dinner without meat or fish."


@dataclass
class Told:
    old: str  # Boston, replaced by Denver
    new: str
    metric: str  # a preference replaced by miles
    miles: str
    vegetarian: str  # a preference of higher importance


def said(server: OAuthServer, text: str, day: str) -> None:
    message = {"role": "user", "content": text, "date": f"{day}T10:00:00Z"}
    api(server, "POST", "/v1/memory/ingest", server.key, messages=[message])


def label_of(batch: dict[str, Any], text: str) -> str:
    """The label the version-2 checkout showed ``text`` under."""
    for line in batch["reflection_contract"]["instructions"].splitlines():
        found = re.match(r"^\[(R\d+)\] [\d-]+: (.*)$", line)
        if found and found.group(2) == text:
            return found.group(1)
    raise AssertionError(f"{text!r} not shown: {batch['reflection_contract']['labels']}")


def reflect(server: OAuthServer, entry: dict[str, Any], replaces: str | None = None) -> str:
    """Check out what waits with contract 2, commit ``entry``; the new reflection's id."""
    key = server.key
    batch = api(server, "POST", "/v1/memory/consolidate/checkout", key, tier=1, contract=2)
    if replaces is not None:
        entry = {**entry, "replaces": [label_of(batch, replaces)]}
    done = api(
        server,
        "POST",
        "/v1/memory/consolidate/commit",
        key,
        batch_id=batch["batch_id"],
        entries=[entry],
    )
    created: str = done["created"][0]["id"]
    return created


def tell(server: OAuthServer) -> Told:
    said(server, "Ana lives in Boston near the harbour with her cats.", "2026-01-05")
    old = reflect(server, {"text": BOSTON, "importance": 6})
    said(server, "Ana moved to Denver in June, cats and all.", "2026-06-05")
    new = reflect(server, {"text": DENVER, "importance": 7}, replaces=BOSTON)
    said(server, "Please always use metric units with me.", "2026-02-01")
    metric = reflect(server, {"text": METRIC, "importance": 7, "kind": "preference"})
    said(server, "Actually, use miles for running, I think in miles.", "2026-03-01")
    entry = {"text": MILES, "importance": 7, "kind": "preference"}
    miles = reflect(server, entry, replaces=METRIC)
    said(server, "Remember Ana is vegetarian when we plan dinners.", "2026-04-01")
    vegetarian = reflect(server, {"text": VEGETARIAN, "importance": 9, "kind": "preference"})
    return Told(old, new, metric, miles, vegetarian)


@pytest.fixture
def told(server: OAuthServer) -> Told:
    return tell(server)


@pytest.fixture
def browser(server: OAuthServer) -> Iterator[httpx2.Client]:
    with signed_in(server, server.key) as made:
        yield made


def page_of(browser: httpx2.Client, path: str) -> str:
    answer = browser.get(path)
    assert answer.status_code == 200, answer.text
    return answer.text


def link(memory_id: str) -> str:
    return f'href="/ui/memories/{quote(memory_id, safe="")}"'


def items(html: str, label: str) -> list[str]:
    """The list items of the list labelled ``label``, in order."""
    found = re.search(rf'<ul class="memories" aria-label="{label}">(.*?)</ul>', html)
    assert found, f"no list {label!r}"
    return re.findall(r"<li .*?</li>", found.group(1))


def test_a_replaced_reflections_page_says_when_and_by_what(
    server: OAuthServer, told: Told, browser: httpx2.Client
) -> None:
    at = api(server, "POST", "/v1/memory/inspect", server.key, memory_id=told.old)["superseded"]
    html = page_of(browser, f"/ui/memories/{told.old}")
    note = re.search(r'<p class="replaced-by" id="replaced-by">(.*?)</p>', html)
    assert note, html
    assert f'Replaced on <time datetime="{at["at"]}">{at["at"][:10]}</time> by' in note.group(1)
    assert link(told.new) in note.group(1)
    assert '<span class="tag replaced">' in html.split("<blockquote")[0]  # in its facts line
    assert "replaced-by" not in page_of(browser, f"/ui/memories/{told.new}")


def test_the_newer_reflections_page_lists_what_it_replaced(
    told: Told, browser: httpx2.Client
) -> None:
    html = page_of(browser, f"/ui/memories/{told.new}")
    assert '<h2 id="replaced-h">What this replaced</h2>' in html
    assert "This reflection replaced 1 earlier reflection" in html
    (row,) = items(html, "Replaced by this")
    assert link(told.old) in row and 'class="memory t2 replaced"' in row
    assert "replaced on" in row
    assert "replaced-h" not in page_of(browser, f"/ui/memories/{told.old}")


def test_search_rows_mark_replaced_reflections_and_preferences(
    told: Told, browser: httpx2.Client
) -> None:
    rows = items(page_of(browser, "/ui/search?q=Ana+Boston+Denver+cats&tier=2"), "Results")
    by_id = {i: r for r in rows for i in (told.old, told.new) if link(i) in r}
    assert 'class="memory t2 replaced"' in by_id[told.old]
    assert '<span class="tag replaced">replaced on' in by_id[told.old]
    assert "replaced" not in by_id[told.new].replace(DENVER, "")
    rows = items(page_of(browser, "/ui/search?q=running+miles+metric+units&tier=2"), "Results")
    miles = next(r for r in rows if link(told.miles) in r)
    assert '<span class="tag preference">preference</span>' in miles
    assert "tag replaced" not in miles


def test_the_overview_lists_the_current_preferences_most_important_first(
    told: Told, browser: httpx2.Client
) -> None:
    html = page_of(browser, "/ui")
    assert '<h2 id="preferences-h">Standing preferences</h2>' in html
    rows = items(html, "Standing preferences")
    assert [link(told.vegetarian) in rows[0], link(told.miles) in rows[1]] == [True, True]
    assert len(rows) == 2  # the replaced one is not a standing preference any more
    assert all('<span class="tag preference">preference</span>' in r for r in rows)
    assert METRIC not in html


def test_the_overview_has_no_preferences_section_without_preferences(
    server: OAuthServer, browser: httpx2.Client
) -> None:
    said(server, "Ana lives in Boston near the harbour with her cats.", "2026-01-05")
    reflect(server, {"text": BOSTON, "importance": 6})
    html = page_of(browser, "/ui")
    assert "preferences-h" not in html and "Standing preferences" not in html


@needs_browser
def test_the_current_facts_pages_are_accessible_and_fit_a_phone(
    server: OAuthServer, told: Told, context: BrowserContext
) -> None:
    page = context.new_page()
    sign_in(page, server, server.key)
    shown = {
        "overview-preferences": "/ui",
        "reflection-replaced": f"/ui/memories/{told.old}",
        "reflection-replacing": f"/ui/memories/{told.new}",
        "search-replaced": "/ui/search?q=Ana+Boston+Denver+cats",
    }
    for width, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)  # type: ignore[arg-type]
        for name, path in shown.items():
            page.goto(server.base + path)
            found = axe_violations(page)
            assert not found, f"{name} at {width}: {dumps(found)}"
            overflow = page.evaluate(
                "() => document.documentElement.scrollWidth - window.innerWidth"
            )
            assert overflow <= 0, f"{name} scrolls sideways at {width} by {overflow}px"
            assert shoot(page, f"{name}-{width}").stat().st_size > 5_000
