"""The explorer's delete offers the choice a derived dry run shows: every reflection of the
batch, or only those whose own evidence includes what goes (docs/consolidation.md, "Each
entry's own evidence"). In a real browser, as the explorer's other checks are."""

from __future__ import annotations

from playwright.sync_api import BrowserContext, expect

from tests.support.oauth import OAuthServer
from tests.support.ui import api, needs_browser, sign_in, stats

pytestmark = needs_browser

SOURCES = [
    "The doctor said the knee surgery went well and recovery takes six weeks.",
    "We planted tomatoes and basil in the new garden beds on Saturday.",
    "Physiotherapy for the knee starts next Monday at the clinic.",
    "The basil in the garden needs watering every morning.",
]
KNEE = "The knee surgery went well; physiotherapy at the clinic starts Monday."
GARDEN = "Tomatoes and basil were planted in the new garden beds, watered every morning."


def test_a_delete_may_take_only_the_reflections_its_evidence_supports(
    server: OAuthServer, context: BrowserContext
) -> None:
    key = server.key
    messages = [
        {"content": text, "date": f"2026-03-0{day}T09:00:00Z"}
        for day, text in enumerate(SOURCES, 1)
    ]
    api(server, "POST", "/v1/memory/ingest", key, messages=messages)
    batch = api(server, "POST", "/v1/memory/consolidate/checkout", key, tier=1)
    entries = [{"text": KNEE, "importance": 6}, {"text": GARDEN, "importance": 6}]
    done = api(
        server, "POST", "/v1/memory/consolidate/commit", key,
        batch_id=batch["batch_id"], entries=entries,
    )  # fmt: skip
    knee, garden = (c["id"] for c in done["created"])
    page = context.new_page()
    sign_in(page, server, key)
    page.goto(server.base + f"/ui/memories/{batch['source_ids'][0]}")
    page.get_by_role("button", name="Delete this memory…").click()
    expect(page.get_by_text("Or only the reflections their evidence supports")).to_be_visible()
    page.get_by_role(
        "button", name="Delete these and the 1 reflection their evidence supports"
    ).click()
    expect(page.get_by_role("status").first).to_contain_text("Deleted 2 memories")
    assert stats(server, key)["tiers"]["2"]["count"] == 1
    page.goto(server.base + f"/ui/memories/{garden}")
    expect(page.get_by_role("heading", level=1)).to_have_text("Tier 2 reflection")
    assert api(server, "POST", "/v1/memory/inspect", key, memory_id=garden)["memory_id"] == garden
    gone = page.request.get(server.base + f"/ui/memories/{knee}")
    assert gone.status == 404
