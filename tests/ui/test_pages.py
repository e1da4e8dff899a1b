"""Every page of the explorer, at desktop and phone widths: axe-core finds no serious or
critical violation, nothing loads from outside the server, nothing scrolls sideways on a
phone, the keyboard reaches every control, and a screenshot of each is written (into
build/screenshots, or MEMORYROUTER_SCREENSHOTS; docs/screenshots holds the ones the docs
show)."""

from __future__ import annotations

from playwright.sync_api import BrowserContext, Page

from tests.support.oauth import OAuthServer
from tests.support.ui import (
    DESKTOP,
    PHONE,
    Seeded,
    axe_violations,
    connect_app,
    dumps,
    needs_browser,
    shoot,
    sign_in,
)

pytestmark = needs_browser


def pages(server: OAuthServer, seeded: Seeded) -> dict[str, str]:
    return {
        "overview": "/ui",
        "search": "/ui/search?q=garden+cycling+rest",
        "timeline": "/ui/timeline",
        "reflection-tier3": f"/ui/memories/{seeded.tier3}",
        "reflection-tier2": f"/ui/memories/{seeded.tier2['garden']}",
        "moment": f"/ui/memories/{seeded.raw['recent'][2]}",
        "add": "/ui/add",
        "correct": f"/ui/memories/{seeded.raw['recent'][2]}/correct",
        "tidy": "/ui/tidy",
    }


def corrected_and_connected(page: Page, server: OAuthServer, seeded: Seeded) -> None:
    """A correction stored and an app connected, so their pages show them."""
    page.goto(server.base + f"/ui/memories/{seeded.raw['recent'][2]}/correct")
    page.get_by_label("What is right").fill("Ana is visiting from Porto, not Lisbon.")
    page.get_by_role("button", name="Store the correction").click()
    page.wait_for_url(server.base + f"/ui/memories/{seeded.raw['recent'][2]}")
    connect_app(server, server.key)


def outside_requests(page: Page, server: OAuthServer) -> list[str]:
    outside: list[str] = []
    page.on(
        "request",
        lambda r: None if r.url.startswith((server.base, "data:")) else outside.append(r.url),
    )
    return outside


def check(page: Page, name: str, width: str) -> None:
    found = axe_violations(page)
    assert not found, f"{name} at {width}: {dumps(found)}"
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{name} scrolls sideways at {width} by {overflow}px"
    path = shoot(page, f"{name}-{width}")
    assert path.stat().st_size > 5_000  # a rendered page, not a blank one


def test_every_page_is_accessible_local_and_fits_a_phone(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = context.new_page()
    outside = outside_requests(page, server)
    page.goto(server.base + "/ui/sign-in")
    check(page, "sign-in", "desktop")
    sign_in(page, server, server.key)
    corrected_and_connected(page, server, seeded)
    for width, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)  # type: ignore[arg-type]
        for name, path in pages(server, seeded).items():
            page.goto(server.base + path)
            check(page, name, width)
    # the confirmation of a delete, and a refusal page
    page.goto(server.base + "/ui/search?q=garden&tier=1")
    page.locator('input[name="ids"]').first.check()
    page.get_by_role("button", name="Delete selected…").click()
    check(page, "delete-confirmation", "phone")
    page.goto(server.base + "/ui/memories/00000000-0000-4000-8000-000000000000")
    check(page, "not-found", "phone")
    assert outside == []


def test_the_keyboard_reaches_search_and_a_result(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = context.new_page()
    sign_in(page, server, server.key)
    page.goto(server.base + "/ui/search")
    page.keyboard.press("Tab")  # the skip link comes first
    assert page.evaluate("() => document.activeElement.textContent") == "Skip to content"
    page.get_by_label("Words or a question").focus()
    page.keyboard.type("tomatoes basil")
    page.keyboard.press("Enter")
    page.wait_for_url("**/ui/search?q=*")
    first = page.locator("ul.memories li.memory a.text").first
    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.classList.contains('text')"):
            break
    else:
        raise AssertionError("Tab never reached a result")
    href = first.get_attribute("href")
    page.keyboard.press("Enter")
    page.wait_for_url(server.base + str(href))


def test_the_accessibility_check_finds_violations_where_there_are_some(
    context: BrowserContext,
) -> None:
    """The check above can fail: an unlabelled field and an image without text are caught."""
    page = context.new_page()
    page.set_content('<html><body><main><input type="text"><img src="data:,"></main></body></html>')
    found = {v["id"] for v in axe_violations(page)}
    assert {"label", "image-alt"} <= found
