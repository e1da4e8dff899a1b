"""The views in a host: Debian's chromium (Playwright) runs a host page that loads a view the
way the ext-apps specification says a web host must (a sandbox proxy on its own origin, the
view in a frame sandboxed to scripts alone, the SDK's ``AppBridge`` over ``postMessage``),
connected to a real server on loopback through the MCP SDK's client with the connection's
key (``tests/support/app_host.py``). axe-core checks the view's frame; screenshots go to
build/screenshots, or MEMORYROUTER_SCREENSHOTS (docs/screenshots holds the ones docs/mcp.md
shows)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from playwright.sync_api import Browser, BrowserContext, FrameLocator, expect

from tests.support.app_host import BRIDGE, AppHost, app_host
from tests.support.mcp import McpServer
from tests.support.ui import AXE, DESKTOP, PHONE, shoot

pytestmark = pytest.mark.skipif(
    not BRIDGE.exists() or not AXE.exists(),
    reason="needs the ext-apps SDK in .tools/extapps and axe-core in .tools/axe (.ci/run)",
)
INLINE_MAX = 500  # px: the inline height Claude's directory allows


@pytest.fixture
def context(chromium: Browser) -> Iterator[BrowserContext]:
    made = chromium.new_context(viewport=DESKTOP)  # type: ignore[arg-type]
    try:
        yield made
    finally:
        made.close()


def seed(host: AppHost) -> dict[str, str]:
    """Moments about the garden and cycling, a reflection of each, a high-level reflection of
    both; then enough new reflections that consolidating them is due (the debt). The ids by
    name."""
    ids: dict[str, str] = {}
    for topic, day in (("garden", "2026-03-02"), ("cycling", "2026-04-11")):
        for i in range(3):
            text = f"The user spent the morning on {topic}, part {i}: detail {i}."
            host.call("store_memory", {"content": text, "date": f"{day}T0{i}:00:00Z"})
        ids[topic] = reflect(host, 1, [(f"Over a few days the user spent time on {topic}.", 6)])
    ids["outdoors"] = reflect(
        host, 2, [("Time outdoors, in the garden and on the bike, is how the user rests.", 8)]
    )
    host.call("store_memory", {"content": "A note about the weekly shopping list."})
    reflect(host, 1, [(f"The user shops on Saturdays, habit {i}.", 10) for i in range(15)])
    return ids


def reflect(host: AppHost, tier: int, entries: list[tuple[str, int]]) -> str:
    batch = host.call("consolidate_memories", {"tier": tier})["structuredContent"]
    assert batch["batch_id"], batch
    host.call(
        "commit_reflections",
        {
            "batch_id": batch["batch_id"],
            "entries": [{"text": t, "importance": i} for t, i in entries],
        },
    )
    found = host.call("search_memories", {"query": entries[0][0], "tiers": [tier + 1]})
    first: str = found["structuredContent"]["memories"][0]["id"]
    return first


def card(view: FrameLocator, text: str) -> Any:
    return view.locator("article").filter(has_text=text).first


def fits(host: AppHost) -> None:
    """The view stays within the inline height and within the frame's width."""
    sizes = host.state()["sizes"]
    assert sizes and max(sizes) <= INLINE_MAX, sizes
    frame = host.frame()
    overflow = frame.evaluate("() => document.documentElement.scrollWidth - innerWidth")
    assert overflow <= 0, overflow
    words = set(frame.evaluate("document.body.innerText").split())
    assert not words & {"null", "undefined", "NaN", "[object"}, words
    assert host.page.locator("#app").bounding_box()["height"] <= INLINE_MAX + 2  # type: ignore[index]


def shot(host: AppHost, name: str, showing: str = "h1") -> None:
    """A screenshot of the host page, the view scrolled to what is ``showing``."""
    host.frame().evaluate(f"document.querySelector({showing!r}).scrollIntoView()")
    shoot(host.page, name)


def axe_in_view(host: AppHost) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations in the view's own frame."""
    frame = host.frame()
    frame.evaluate(AXE.read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = frame.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' '))}))"
    )
    return [v for v in found if v["impact"] in ("serious", "critical")]


def test_search_opens_a_reflection_walks_to_its_moments_and_asks_to_consolidate(
    context: BrowserContext, embedded: McpServer
) -> None:
    with app_host(context, embedded) as host:
        seed(host)
        view = host.show("search_memories", {"query": "garden"})
        expect(view.locator("h1")).to_have_text("Memories about “garden”")
        outdoors = card(view, "Time outdoors")
        expect(outdoors.locator(".tag")).to_have_text("Tier 3 · high-level reflection")
        expect(outdoors).to_contain_text("importance 8/10")
        expect(card(view, "part 0")).to_contain_text("2026-03-02")
        # down the lineage, through the host's tools/call: tier 3 -> tier 2 -> the moments
        toggle = outdoors.get_by_role("button", name="Sources").first
        toggle.click()
        expect(toggle).to_have_attribute("aria-expanded", "true")
        garden = card(outdoors.locator(".sources"), "on garden.")
        expect(garden.locator(".tag")).to_have_text("Tier 2 · reflection")
        garden.get_by_role("button", name="Sources").first.click()
        expect(garden.locator(".sources article")).to_have_count(3)
        expect(garden.locator(".sources")).to_contain_text("part 2: detail 2")
        assert axe_in_view(host) == []
        fits(host)
        shot(host, "mcp-app-search-desktop")
        # the debt, and the host's model asked to consolidate (the view calls no model)
        debt = view.get_by_role("region", name="Reflection debt")
        expect(debt).to_contain_text("unconsolidated importance")
        debt.get_by_role("button", name="Consolidate").click()
        expect(view.get_by_role("status")).to_contain_text("Asked your assistant")
        [message] = host.state()["messages"]
        assert message["role"] == "user"
        assert "consolidate_memories" in message["content"][0]["text"]
        # open the reflection: the memory view, its sources listed
        outdoors.get_by_role("button", name="Open this tier 3 memory").first.click()
        expect(view.locator("h1")).to_have_text("Tier 3 high-level reflection")
        expect(view.locator("h2").first).to_have_text("Sources (2)")
        assert axe_in_view(host) == []
        fits(host)
        shot(host, "mcp-app-memory-desktop")
        calls = [c["name"] for c in host.state()["calls"]]
        assert calls.count("inspect_memory") == 3 and "memory_view_abilities" in calls


def test_forget_shows_both_dry_runs_and_deletes_only_what_the_host_confirms(
    context: BrowserContext, embedded: McpServer
) -> None:
    with app_host(context, embedded) as host:
        ids = seed(host)
        view = host.show("inspect_memory", {"memory_id": ids["garden"]}, theme="dark")
        expect(view.locator("h1")).to_have_text("Tier 2 reflection")
        background = host.frame().evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(27, 27, 29)"  # the host's dark theme
        host.approve = lambda _tool, arguments: arguments.get("dry_run") is True
        view.get_by_role("button", name="Forget this…").click()
        choices = view.locator(".choice")
        expect(choices).to_have_count(2)
        expect(choices.nth(0)).to_contain_text("Deletes 1 memory (1 reflection).")
        expect(choices.nth(1)).to_contain_text("Deletes 2 memories (1 reflection, 1 high-level")
        assert host.asked == [
            ("delete_memories", {"ids": [ids["garden"]], "dry_run": True}),
            ("delete_memories", {"ids": [ids["garden"]], "derived": True, "dry_run": True}),
        ]
        assert axe_in_view(host) == []
        fits(host)
        shot(host, "mcp-app-forget-dark-desktop", showing="section[aria-label=Forget]")
        # the host's user declines: nothing goes
        view.get_by_role("button", name="Forget only this").click()
        expect(view.get_by_role("status")).to_contain_text("Not deleted: the user declined")
        assert not host.call("inspect_memory", {"memory_id": ids["garden"]}).get("isError")
        # and confirms: it goes, and only it
        host.approve = lambda _tool, _arguments: True
        view.get_by_role("button", name="Forget only this").click()
        expect(view.get_by_role("status")).to_have_text("Deleted 1 memory.")
        assert host.call("inspect_memory", {"memory_id": ids["garden"]}).get("isError")
        assert not host.call("inspect_memory", {"memory_id": ids["outdoors"]}).get("isError")


def read_only_key(server: McpServer) -> str:
    """A read-only key of the same vault, minted over REST with the read-write key."""
    base = server.url.removesuffix("/mcp")
    made = httpx2.post(
        f"{base}/v1/keys",
        json={"name": "reader", "read_only": True},
        headers={"Authorization": f"Bearer {server.key}"},
        timeout=30,
    )
    assert made.status_code == 201, made.text
    key: str = made.json()["key"]
    return key


def test_a_read_only_keys_view_offers_no_forget_nor_consolidation_at_390_px(
    chromium: Browser, embedded: McpServer
) -> None:
    with app_host(chromium.new_context(viewport=DESKTOP), embedded) as writer:  # type: ignore[arg-type]
        ids = seed(writer)
    context = chromium.new_context(viewport=PHONE)  # type: ignore[arg-type]
    try:
        with app_host(context, embedded, read_only_key(embedded)) as host:
            view = host.show("search_memories", {"query": "garden"})
            expect(view.get_by_role("region", name="Reflection debt")).to_be_visible()
            expect(view.get_by_role("button", name="Consolidate")).to_have_count(0)
            outdoors = card(view, "Time outdoors")
            outdoors.get_by_role("button", name="Sources").first.click()
            expect(outdoors.locator(".sources article")).to_have_count(2)
            assert axe_in_view(host) == []
            fits(host)
            shot(host, "mcp-app-search-phone")
            card(view, "on garden.").get_by_role("button", name="Open this tier 2 memory").click()
            expect(view.locator("h1")).to_have_text("Tier 2 reflection")
            expect(view.get_by_role("button", name="Forget this…")).to_have_count(0)
            fits(host)
            # the date search draws the same view
            view = host.show(
                "date_search_memories", {"from_date": "2026-04-01", "to_date": "2026-04-30"}
            )
            expect(view.locator("h1")).to_have_text("Memories from 2026-04-01 to 2026-04-30")
            expect(card(view, "on cycling.").locator(".tag")).to_have_text("Tier 2 · reflection")
            assert axe_in_view(host) == []
            fits(host)
            assert ids["garden"] in {c["arguments"].get("memory_id") for c in host.state()["calls"]}
    finally:
        context.close()
