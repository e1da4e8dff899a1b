"""The explorer's helpers: a vault seeded with all three tiers, sign-in (by the pages and by a
real browser), axe-core, screenshots."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from playwright.sync_api import Page

from tests.support import CHROMIUM
from tests.support.oauth import OAuthServer, grant_tokens

ROOT = Path(__file__).resolve().parents[2]


AXE = ROOT / ".tools/axe/node_modules/axe-core/axe.min.js"


SHOTS = Path(os.environ.get("MEMORYROUTER_SCREENSHOTS", ROOT / "build/screenshots"))


DESKTOP = {"width": 1280, "height": 900}


PHONE = {"width": 390, "height": 844}


needs_browser = pytest.mark.skipif(
    not CHROMIUM.exists() or not AXE.exists(),
    reason="needs Debian's /usr/bin/chromium and axe-core in .tools/axe (.ci/run installs both)",
)


@dataclass
class Seeded:
    """What the seeded vault holds: raw ids by topic, the tier-2 and tier-3 ids."""

    raw: dict[str, list[str]]
    tier2: dict[str, str]
    tier3: str


def api(server: OAuthServer, method: str, path: str, key: str, **body: Any) -> Any:
    response = httpx2.request(
        method,
        server.base + path,
        headers={"Authorization": f"Bearer {key}"},
        json=body or None,
        timeout=30,
    )
    assert response.status_code < 300, response.text
    return response.json()


def reflect(server: OAuthServer, key: str, tier: int, text: str, importance: int) -> str:
    batch = api(server, "POST", "/v1/memory/consolidate/checkout", key, tier=tier)
    assert batch["batch_id"], batch
    done = api(
        server,
        "POST",
        "/v1/memory/consolidate/commit",
        key,
        batch_id=batch["batch_id"],
        entries=[{"text": text, "importance": importance}],
    )
    created: str = done["created"][0]["id"]
    return created


TOPICS = {
    "garden": ("2026-03-02", "The user planted tomatoes and basil in the back garden"),
    "cycling": ("2026-04-11", "The user rode the coastal cycling route with a friend"),
}


def seed(server: OAuthServer, key: str) -> Seeded:
    """Raw moments on two topics, a tier-2 reflection of each, a tier-3 one of both; then
    more raw moments left unconsolidated."""
    raw: dict[str, list[str]] = {}
    tier2: dict[str, str] = {}
    for topic, (day, text) in TOPICS.items():
        messages = [
            {
                "role": "user",
                "content": f"{text}, part {i}: detail {i} about {topic}.",
                "date": f"{day}T0{i}:00:00Z",
            }
            for i in range(3)
        ]
        raw[topic] = api(server, "POST", "/v1/memory/ingest", key, messages=messages)["ids"]
        tier2[topic] = reflect(
            server, key, 1, f"Over a few days the user spent time on {topic}.", 6
        )
    tier3 = reflect(
        server,
        key,
        2,
        "Time outdoors, in the garden and on the bike, matters to the user as a way to rest.",
        8,
    )
    later = [
        {
            "role": "user",
            "content": f"A note about the weekly shopping list, item {i}.",
            "date": f"2026-05-0{i + 1}T09:00:00Z",
        }
        for i in range(4)
    ]
    raw["shopping"] = api(server, "POST", "/v1/memory/ingest", key, messages=later)["ids"]
    recent = [
        {"role": role, "content": content, "date": f"2026-07-{day:02d}T{hour:02d}:15:00Z"}
        for day, hour, role, content in (
            (3, 8, "user", "I'm starting a new job at the library on Monday, mornings only."),
            (3, 8, "assistant", "Congratulations! Mornings leave your afternoons free."),
            (9, 19, "user", "My sister Ana is visiting from Lisbon for two weeks in August."),
            (14, 7, "user", "Booked the bike for a service; the back brake squeaks."),
            (21, 18, "user", "Remind me that Ana is vegetarian when we plan dinners."),
            (28, 12, "user", "The tomatoes finally ripened, far more than we can eat."),
        )
    ]
    raw["recent"] = api(server, "POST", "/v1/memory/ingest", key, messages=recent)["ids"]
    return Seeded(raw, tier2, tier3)


def sign_in(page: Page, server: OAuthServer, key: str) -> None:
    page.goto(server.base + "/ui")
    assert "/ui/sign-in" in page.url
    page.get_by_label("Memory key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(server.base + "/ui")


def axe_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it stands."""
    page.evaluate(AXE.read_text(encoding="utf-8"))
    found = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, help: v.help, "
        "nodes: v.nodes.map(n => n.target.join(' '))}))"
    )
    return [v for v in found if v["impact"] in ("serious", "critical")]


def shoot(page: Page, name: str) -> Path:
    """A full-page screenshot at the current viewport, into docs/screenshots (or
    MEMORYROUTER_SCREENSHOTS)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def stats(server: OAuthServer, key: str) -> dict[str, Any]:
    found: dict[str, Any] = api(server, "GET", "/v1/memory/stats", key)
    return found


def dumps(value: Any) -> str:
    return json.dumps(value, indent=1)


def connect_app(server: OAuthServer, key: str) -> tuple[str, dict[str, Any]]:
    """An app signed in to ``key``'s vault through the consent pages: (its client id, its
    tokens). Run off the test's thread, where Playwright's event loop runs."""
    with ThreadPoolExecutor(1) as pool:
        connected = pool.submit(lambda: anyio.run(grant_tokens, server, key))
        return connected.result(timeout=60)


CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@contextmanager
def signed_in(server: OAuthServer, key: str) -> Iterator[httpx2.Client]:
    """A client that signed in through the form, as a browser does (cookies kept)."""
    with httpx2.Client(base_url=server.base, follow_redirects=False, timeout=30) as browser:
        form = browser.get("/ui/sign-in")
        token = CSRF.search(form.text)
        assert token, form.text
        answer = browser.post("/ui/sign-in", data={"csrf": token.group(1), "key": key})
        assert answer.status_code == 303, answer.text
        yield browser


def csrf_of(browser: httpx2.Client) -> str:
    page = browser.get("/ui")
    assert page.status_code == 200, page.status_code
    found = CSRF.search(page.text)
    assert found
    return found.group(1)
