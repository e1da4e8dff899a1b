"""A person adds a memory by hand, and corrects one: the correction is a new memory that
says what it corrects, the earlier one stays as it was and its page links to it. A
read-only key is offered neither, and its posts are refused."""

from __future__ import annotations

import re

from playwright.sync_api import BrowserContext, Page, expect

from tests.support.oauth import OAuthServer
from tests.support.ui import Seeded, api, needs_browser, sign_in, stats

pytestmark = needs_browser


def signed_in_page(context: BrowserContext, server: OAuthServer, key: str) -> Page:
    page = context.new_page()
    sign_in(page, server, key)
    return page


def memory_id_of(page: Page) -> str:
    return page.url.rsplit("/", 1)[-1]


def test_a_memory_added_by_hand_is_stored_dated_and_found(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = signed_in_page(context, server, server.key)
    before = stats(server, server.key)["tiers"]["1"]["count"]
    page.get_by_role("link", name="Add", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Add a memory")
    page.get_by_label("What to remember").fill("Ana's birthday is on the ninth of October.")
    page.get_by_label("When (empty: now)").fill("2026-07-30")
    page.get_by_role("button", name="Store the memory").click()
    expect(page.get_by_role("status").first).to_have_text("Stored the memory.")
    expect(page.get_by_role("heading", level=1)).to_have_text("Tier 1 moment")
    expect(page.locator("blockquote.content")).to_have_text(
        "Ana's birthday is on the ninth of October."
    )
    stored = api(server, "POST", "/v1/memory/inspect", server.key, memory_id=memory_id_of(page))
    assert (stored["role"], stored["date"]) == ("user", "2026-07-30T00:00:00.000Z")
    assert stats(server, server.key)["tiers"]["1"]["count"] == before + 1
    found = api(server, "POST", "/v1/memory/search", server.key, query="Ana birthday October")
    assert memory_id_of(page) in [row["id"] for row in found["memories"]]


def test_an_empty_or_misdated_memory_gets_the_form_back_and_stores_nothing(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = signed_in_page(context, server, server.key)
    page.goto(server.base + "/ui/add")
    csrf = page.locator('form.signout input[name="csrf"]').get_attribute("value") or ""
    before = stats(server, server.key)["total_memories"]
    for form in ({"text": "  "}, {"text": "ok", "date": "May 1st"}, {"text": "x", "role": "god"}):
        answer = page.request.post(server.base + "/ui/add", form={"csrf": csrf, **form})
        assert answer.status == 400, form
        assert 'role="alert"' in answer.text()
    assert stats(server, server.key)["total_memories"] == before


def test_a_correction_is_a_new_memory_that_the_corrected_ones_page_links_to(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = signed_in_page(context, server, server.key)
    wrong = seeded.raw["recent"][2]  # "My sister Ana is visiting from Lisbon …"
    earlier = api(server, "POST", "/v1/memory/inspect", server.key, memory_id=wrong)
    page.goto(server.base + f"/ui/memories/{wrong}")
    page.get_by_role("link", name="Correct this memory…").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Correct a memory")
    page.get_by_label("What is right").fill("Ana is visiting from Porto, not Lisbon.")
    page.get_by_role("button", name="Store the correction").click()
    # back on the corrected memory, unchanged, with a link to its correction
    assert page.url == server.base + f"/ui/memories/{wrong}"
    expect(page.get_by_role("status").first).to_contain_text("Stored the correction.")
    expect(page.locator("blockquote.content")).to_have_text(earlier["content"])
    corrections = page.get_by_role("list", name="Corrected by")
    expect(corrections.locator("li")).to_have_count(1)
    link = corrections.locator("a.text")
    expect(link).to_contain_text("Ana is visiting from Porto, not Lisbon.")
    assert api(server, "POST", "/v1/memory/inspect", server.key, memory_id=wrong) == earlier
    # the correction: a moment dated as what it corrects, saying what it corrects in words
    link.click()
    correction = memory_id_of(page)
    stored = api(server, "POST", "/v1/memory/inspect", server.key, memory_id=correction)
    assert stored["tier"] == 1 and stored["date"] == earlier["date"]
    assert re.fullmatch(
        r'Correction, made \d{4}-\d{2}-\d{2}, of the earlier memory "My sister Ana is '
        r'visiting from Lisbon for two weeks in August\.": Ana is visiting from Porto, not '
        r"Lisbon\.",
        stored["content"],
    )
    assert wrong not in stored["content"]  # never an id in a text
    page.get_by_role("list", name="Corrects").locator(f'a[href="/ui/memories/{wrong}"]').click()
    assert page.url == server.base + f"/ui/memories/{wrong}"
    # a question about that time finds both
    found = api(server, "POST", "/v1/memory/search", server.key, query="Ana visiting Lisbon")
    assert {wrong, correction} <= {row["id"] for row in found["memories"]}


def test_a_corrected_memory_deleted_later_leaves_no_dead_link(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = signed_in_page(context, server, server.key)
    wrong = seeded.raw["recent"][3]
    page.goto(server.base + f"/ui/memories/{wrong}/correct")
    page.get_by_label("What is right").fill("The front brake squeaks, not the back one.")
    page.get_by_role("button", name="Store the correction").click()
    correction = page.get_by_role("list", name="Corrected by").locator("a.text")
    href = correction.get_attribute("href") or ""
    api(server, "POST", "/v1/memory/delete-ids", server.key, ids=[wrong])
    page.goto(server.base + href)
    expect(page.get_by_role("heading", level=1)).to_have_text("Tier 1 moment")
    assert page.get_by_role("list", name="Corrects").count() == 0


def test_a_read_only_key_is_offered_no_way_to_add_or_correct_and_is_refused(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    reader = api(server, "POST", "/v1/keys", server.key, name="reader", read_only=True)["key"]
    page = signed_in_page(context, server, reader)
    assert page.get_by_role("link", name="Add", exact=True).count() == 0
    moment = seeded.raw["garden"][0]
    page.goto(server.base + f"/ui/memories/{moment}")
    assert page.get_by_role("link", name=re.compile("Correct")).count() == 0
    for path in ("/ui/add", f"/ui/memories/{moment}/correct"):
        shown = page.goto(server.base + path)
        assert shown is not None and shown.status == 403
        assert page.locator("textarea, form[method=post]:not(.signout)").count() == 0
    csrf = page.locator('form.signout input[name="csrf"]').get_attribute("value") or ""
    before = stats(server, server.key)["total_memories"]
    for path in ("/ui/add", f"/ui/memories/{moment}/correct"):
        answer = page.request.post(server.base + path, form={"csrf": csrf, "text": "sneaky"})
        assert answer.status == 403 and "read-only" in answer.text()
    assert stats(server, server.key)["total_memories"] == before
