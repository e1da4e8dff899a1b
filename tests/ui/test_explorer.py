"""A person uses the explorer in a real browser: signs in, reads the overview, searches with
each filter, walks a tier-3 reflection down to a raw moment and back up, deletes with
confirmation, pages through the timeline, tidies (export, keys, wipe). Read-only keys see
everything and change nothing."""

from __future__ import annotations

import json
import re

from playwright.sync_api import BrowserContext, Page, expect

from mcp_memoryrouter.ui.sessions import IDLE_SECONDS
from tests.support.oauth import OAuthServer
from tests.support.ui import Seeded, api, needs_browser, sign_in, stats

pytestmark = needs_browser


def open_page(context: BrowserContext, server: OAuthServer, key: str) -> Page:
    page = context.new_page()
    sign_in(page, server, key)
    return page


def count_of(page: Page, tier: int) -> int:
    return int(page.locator(f'dd[data-tier="{tier}"]').inner_text())


def test_sign_in_keeps_the_key_out_of_the_browser_and_the_overview_matches_stats(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = open_page(context, server, server.key)
    truth = stats(server, server.key)
    for tier in (1, 2, 3):
        assert count_of(page, tier) == truth["tiers"][str(tier)]["count"]
    assert int(page.locator("#total").inner_text()) == truth["total_memories"]
    assert int(page.locator("#pending").inner_text()) == truth["pending_embeddings"]
    debt = truth["reflection"]
    raw = page.locator("#raw-debt")
    assert (
        int(raw.get_attribute("value") or -1) == debt["unconsolidated"]["raw"]["importance_equiv"]
    )
    assert int(raw.get_attribute("high") or -1) == debt["threshold_importance"]
    tier2 = page.locator("#tier2-debt")
    assert int(tier2.get_attribute("value") or -1) == debt["unconsolidated"]["tier2"]["importance"]
    assert page.locator("#last-consolidation").inner_text() != "never"
    # the chart: a bar segment per tier present, its numbers in the table
    for tier in (1, 2, 3):
        assert page.locator(f"figure.chart rect.t{tier}").count() >= 1
    # the key is nowhere the browser keeps things
    assert server.key not in page.content()
    assert server.key not in page.url
    storage = page.evaluate("() => JSON.stringify({...localStorage, ...sessionStorage})")
    assert server.key not in storage
    cookies = context.cookies()
    assert [c["name"] for c in cookies] == ["memoryrouter_ui"]
    (cookie,) = cookies
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
    assert server.key not in cookie["value"]


def test_a_wrong_key_is_refused_with_a_page_that_says_what_to_do(
    server: OAuthServer, context: BrowserContext
) -> None:
    page = context.new_page()
    page.goto(server.base + "/ui/sign-in")
    page.get_by_label("Memory key").fill("mk_not_a_key_of_this_server")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.get_by_role("button", name="Sign in").click()
    assert answer.value.status == 401
    expect(page.get_by_role("alert")).to_contain_text("not a key of this server")
    assert context.cookies() == [] or all(c["name"] != "memoryrouter_ui" for c in context.cookies())


def search(page: Page, server: OAuthServer, **fields: object) -> list[str]:
    """The search form filled as a person would; the ids of the rows shown."""
    page.goto(server.base + "/ui/search")
    if "q" in fields:
        page.get_by_label("Words or a question").fill(str(fields["q"]))
    for tier in fields.get("tiers", ()):  # type: ignore[attr-defined]
        page.get_by_label(re.compile(f"Tier {tier} ·")).check()
    if "importance" in fields:
        page.get_by_label("Reflections of importance").select_option(str(fields["importance"]))
    if "date_from" in fields:
        page.get_by_label("From").fill(str(fields["date_from"]))
    if "date_to" in fields:
        page.get_by_label("To", exact=True).fill(str(fields["date_to"]))
    page.get_by_role("button", name="Search").click()
    page.wait_for_load_state()
    links = page.locator("ul.memories li.memory a.text")
    return [str(h).rsplit("/", 1)[-1] for h in links.evaluate_all("a => a.map(x => x.href)")]


def tiers_shown(page: Page) -> set[int]:
    classes = page.locator("ul.memories li.memory").evaluate_all("li => li.map(x => x.className)")
    return {int(c.split(" t")[1]) for c in classes}


def test_search_with_each_filter(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = open_page(context, server, server.key)
    found = search(page, server, q="tomatoes basil garden")
    assert set(seeded.raw["garden"]) & set(found)
    # every row says its tier, and reflections their importance and coverage
    first = page.locator("ul.memories li.memory").first
    expect(first.locator(".tag")).to_contain_text("Tier")

    found = search(page, server, q="garden cycling", tiers=[2])
    assert set(found) == set(seeded.tier2.values())
    assert tiers_shown(page) == {2}
    expect(page.locator("ul.memories li.memory .importance").first).to_contain_text("importance 6")
    expect(page.locator("ul.memories li.memory").first).to_contain_text("covers")

    found = search(page, server, q="garden bike rest", importance=8)
    assert found == [seeded.tier3]

    found = search(page, server, date_from="2026-05-01", date_to="2026-05-31")
    assert set(found) == set(seeded.raw["shopping"])

    found = search(page, server, q="shopping list", date_from="2026-03-01", date_to="2026-03-31")
    assert not set(found) & set(seeded.raw["shopping"])
    assert set(found) <= {*seeded.raw["garden"], seeded.tier2["garden"]}

    page.goto(server.base + "/ui/search?from=May+1st")
    expect(page.get_by_role("alert")).to_contain_text("must be a date like")


def test_walk_a_tier3_reflection_down_to_a_moment_and_back_up(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = open_page(context, server, server.key)
    page.goto(server.base + f"/ui/memories/{seeded.tier3}")
    expect(page.get_by_role("heading", level=1)).to_have_text("Tier 3 high-level reflection")
    expect(page.locator("#sources-summary")).to_contain_text("2 sources")
    sources = page.get_by_role("list", name="Sources")
    garden = seeded.tier2["garden"]
    sources.locator(f'a[href="/ui/memories/{garden}"]').click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Tier 2 reflection")
    moment = seeded.raw["garden"][0]
    page.get_by_role("list", name="Sources").locator(f'a[href="/ui/memories/{moment}"]').click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Tier 1 moment")
    expect(page.locator("blockquote.content")).to_contain_text("tomatoes and basil")
    # and back up: the moment names the reflection built from it, which names the top
    page.get_by_role("list", name="Built from this").locator(
        f'a[href="/ui/memories/{garden}"]'
    ).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Tier 2 reflection")
    page.get_by_role("list", name="Built from this").locator(
        f'a[href="/ui/memories/{seeded.tier3}"]'
    ).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Tier 3 high-level reflection")


def test_delete_asks_first_then_counts_and_lineage_change(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = open_page(context, server, server.key)
    before = stats(server, server.key)["tiers"]["1"]["count"]
    victim = seeded.raw["garden"][1]
    search(page, server, q="tomatoes basil garden", tiers=[1])
    page.locator(f'input[name="ids"][value="{victim}"]').check()
    page.get_by_role("button", name="Delete selected…").click()
    # the confirmation says what happens to reflections built from it, and nothing is gone yet
    expect(page.get_by_role("heading", level=1)).to_have_text("Delete memories?")
    expect(page.locator("main")).to_contain_text("keeps its text and counts the source as deleted")
    expect(page.locator("main")).to_contain_text("Also delete what was built from them")
    assert stats(server, server.key)["tiers"]["1"]["count"] == before
    page.get_by_role("button", name="Delete only these (1)").click()
    expect(page.get_by_role("status").first).to_contain_text("Deleted 1 memory.")
    assert stats(server, server.key)["tiers"]["1"]["count"] == before - 1
    page.goto(server.base + "/ui")
    assert count_of(page, 1) == before - 1
    # the reflection built from it counts the deleted source
    page.goto(server.base + f"/ui/memories/{seeded.tier2['garden']}")
    expect(page.locator("#sources-summary")).to_contain_text("3 sources, 1 of them deleted")
    assert page.locator(f'a[href="/ui/memories/{victim}"]').count() == 0


def test_a_derived_delete_takes_the_reflections_above(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = open_page(context, server, server.key)
    page.goto(server.base + f"/ui/memories/{seeded.raw['cycling'][0]}")
    page.get_by_role("button", name="Delete this memory…").click()
    page.get_by_role("button", name=re.compile(r"Delete these and the 2 reflections")).click()
    expect(page.get_by_role("status").first).to_contain_text("Deleted 3 memories")
    assert page.url == server.base + "/ui"  # the deleted memory's page is gone
    left = stats(server, server.key)["tiers"]
    assert (left["2"]["count"], left["3"]["count"]) == (1, 0)


def test_the_timeline_pages_through_a_window_both_ways(
    server: OAuthServer, context: BrowserContext
) -> None:
    filler = " ".join(["words about the long day"] * 40)
    messages = [
        {
            "content": f"Entry {i:02d}: {filler}",
            "date": f"2026-06-{1 + i // 2:02d}T{i % 2:02d}:30:00Z",
        }
        for i in range(40)
    ]
    api(server, "POST", "/v1/memory/ingest", server.key, messages=messages)
    page = open_page(context, server, server.key)
    for order in ("newest_first", "oldest_first"):
        page.goto(server.base + f"/ui/timeline?from=2026-06-01&to=2026-06-30&order={order}")
        seen: list[str] = []
        pages = 0
        while True:
            pages += 1
            texts = page.locator("ul.memories li.memory a.text").all_inner_texts()
            seen += [t[:8] for t in texts]
            following = page.get_by_role("link", name="Next page")
            if following.count() == 0:
                break
            with page.expect_navigation():  # read the next page, never the one unloading
                following.click()
        assert pages > 1
        expected = [f"Entry {i:02d}" for i in range(40)]
        assert seen == (expected[::-1] if order == "newest_first" else expected)


def test_tidy_exports_mints_revokes_and_wipes_with_typed_confirmation(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = open_page(context, server, server.key)
    page.goto(server.base + "/ui/tidy")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download the export").click()
    text = download.value.path().read_text(encoding="utf-8")
    lines = [json.loads(x) for x in text.splitlines() if x.strip()]
    assert len(lines) == stats(server, server.key)["total_memories"]

    page.get_by_label("Name of the new key").fill("phone")
    page.get_by_role("button", name="Make the key").click()  # read-only unless chosen
    minted = page.locator("code.secret").inner_text()
    assert minted.startswith("mk_")
    assert api(server, "GET", "/v1/keys/current", minted)["read_only"] is True
    expect(page.locator("table.keys")).to_contain_text("phone")
    assert page.url == server.base + "/ui/tidy"  # a reload sends no form again
    page.reload()  # and the key is shown once
    assert page.locator("code.secret").count() == 0
    assert len(api(server, "GET", "/v1/keys", server.key)["keys"]) == 2

    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke phone").click()
    expect(page.get_by_role("status").first).to_contain_text("The key is revoked")
    expect(page.locator("table.keys")).not_to_contain_text("phone")

    total = stats(server, server.key)["total_memories"]
    page.get_by_label(re.compile("Type the vault reference")).fill("not it")
    page.get_by_role("button", name="Wipe every memory").click()
    expect(page.get_by_role("alert")).to_contain_text("Nothing was wiped")
    assert stats(server, server.key)["total_memories"] == total
    vault = server.vault_of(server.key)
    page.get_by_label(re.compile("Type the vault reference")).fill(vault)
    page.get_by_role("button", name="Wipe every memory").click()
    expect(page.get_by_role("status").first).to_contain_text(f"{total} memories deleted")
    assert stats(server, server.key)["total_memories"] == 0


def test_a_read_only_key_sees_everything_and_changes_nothing(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    reader = api(server, "POST", "/v1/keys", server.key, name="reader", read_only=True)["key"]
    page = open_page(context, server, reader)
    expect(page.locator(".who")).to_contain_text("read-only key")
    assert count_of(page, 3) == 1
    search(page, server, q="garden")
    assert page.locator("ul.memories li.memory").count() > 0
    assert page.locator('input[name="ids"]').count() == 0
    assert page.get_by_role("button", name=re.compile("Delete")).count() == 0
    page.goto(server.base + f"/ui/memories/{seeded.raw['garden'][0]}")
    assert page.get_by_role("button", name=re.compile("Delete")).count() == 0
    page.goto(server.base + "/ui/tidy")
    assert page.get_by_role("button", name=re.compile("Wipe|Revoke|Make")).count() == 0
    # the requests themselves are refused, with the session's own CSRF token
    csrf = page.locator('form.signout input[name="csrf"]').get_attribute("value")
    before = stats(server, server.key)["total_memories"]
    for path, form in (
        ("/ui/delete/confirm", {"ids": seeded.raw["garden"][0], "derived": "no"}),
        ("/ui/wipe", {"confirm": server.vault_of(server.key)}),
        ("/ui/keys", {"name": "sneaky"}),
    ):
        answer = page.request.post(server.base + path, form={"csrf": csrf or "", **form})
        assert answer.status == 403, (path, answer.status)
        assert "read-only" in answer.text()
    assert stats(server, server.key)["total_memories"] == before


def test_an_expired_session_and_a_form_without_its_token_are_refused(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = open_page(context, server, server.key)
    before = stats(server, server.key)["total_memories"]
    # a change sent without the page's CSRF token, with the browser's own cookie
    answer = page.request.post(
        server.base + "/ui/wipe", form={"confirm": server.vault_of(server.key)}
    )
    assert answer.status == 403
    assert "Load the page again" in answer.text()
    assert stats(server, server.key)["total_memories"] == before
    # a session left idle past its time: the next page asks to sign in again
    server.clock.advance(IDLE_SECONDS + 1)
    page.goto(server.base + f"/ui/memories/{seeded.tier3}")
    assert "/ui/sign-in" in page.url
    expect(page.get_by_role("status")).to_contain_text("Your session ended")
    # and signing in comes back to the page that was asked for
    page.get_by_label("Memory key").fill(server.key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(server.base + f"/ui/memories/{seeded.tier3}")
