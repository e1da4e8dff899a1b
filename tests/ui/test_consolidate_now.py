"""Beside the debt gauges, the overview says how to consolidate now: this server runs no
model, so it shows the command that does it with one's own, naming this server. Run as
shown (with a stand-in model), it leaves nothing waiting."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import BrowserContext, expect

from tests.reflector.provider import Provider
from tests.support import live_server
from tests.support.oauth import OAuthServer, oauth_server_at
from tests.support.reflect import PROGRAM
from tests.support.ui import Seeded, api, needs_browser, sign_in, stats

pytestmark = needs_browser


def test_the_overview_shows_the_command_that_consolidates_now_and_it_runs_as_shown(
    server: OAuthServer, seeded: Seeded, context: BrowserContext, tmp_path: Path
) -> None:
    page = context.new_page()
    sign_in(page, server, server.key)
    section = page.locator("section", has=page.get_by_role("heading", name="Reflection debt"))
    expect(section.get_by_role("heading", name="Consolidate now")).to_be_visible()
    shown = section.locator("pre.command").inner_text()
    assert shown == (
        'mcp-memoryrouter reflect --until-empty --key-file vault.key --model-cmd "claude -p"'
        f" --api-url {server.base}"
    )
    assert stats(server, server.key)["reflection"]["unconsolidated"]["raw"]["units"] > 0
    # as a person would: the key in vault.key (0600), the command with their own model
    key_file = tmp_path / "vault.key"
    key_file.write_text(server.key + "\n", encoding="utf-8")
    key_file.chmod(0o600)
    words = shlex.split(shown)
    words[words.index("--model-cmd") + 1] = f"{sys.executable} {PROGRAM}"
    words[0] = str(Path(sys.executable).with_name("mcp-memoryrouter"))
    env = {**os.environ, "REFLECT_TEST_LOG": str(tmp_path / "model.log")}
    env.pop("MEMORYROUTER_KEY", None)
    done = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    left = stats(server, server.key)["reflection"]["unconsolidated"]
    assert left["raw"]["units"] == 0


def test_a_read_only_key_is_shown_the_command_and_no_button(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    reader = api(server, "POST", "/v1/keys", server.key, name="reader", read_only=True)["key"]
    page = context.new_page()
    sign_in(page, server, reader)
    expect(page.locator("pre.command")).to_contain_text("reflect --until-empty")
    assert page.get_by_role("button", name="Consolidate now").count() == 0


def test_with_the_servers_reflector_a_button_consolidates_a_new_vault_now(
    context: BrowserContext, tmp_path: Path
) -> None:
    """The README's first steps, ending in the explorer: a new vault's few memories become a
    reflection the person opens, without typing a model command."""
    double = Provider()
    with (
        live_server(double) as provider_url,
        oauth_server_at(
            tmp_path / "server",
            reflector_url=provider_url,
            reflector_model="reflector-model",
            reflector_format="google",
        ) as server,
    ):
        key = server.key
        moments = [
            {"role": "user", "content": f"Day {i}: walked Biscuit on Brighton beach", "date": d}
            for i, d in enumerate(["2026-03-01", "2026-03-02", "2026-03-03"], start=1)
        ]
        api(server, "POST", "/v1/memory/ingest", key, messages=moments)
        page = context.new_page()
        sign_in(page, server, key)
        section = page.locator("section", has=page.get_by_role("heading", name="Reflection debt"))
        assert section.locator("pre.command").count() == 0  # the server's model writes them
        section.get_by_role("button", name="Consolidate now").click()
        page.wait_for_url(server.base + "/ui")
        expect(page.get_by_role("status").first).to_contain_text(
            "Consolidated now: 1 batch committed: 1 reflection of 3 memories"
        )
        expect(page.locator('dd[data-tier="2"]')).to_have_text("1")
        [reflection] = api(
            server, "POST", "/v1/memory/date-search", key, **{"from": "2026-01-01", "tiers": [2]}
        )["memories"]
        page.goto(f"{server.base}/ui/memories/{reflection['id']}")
        expect(page.get_by_text("3 moments from 2026-03-01")).to_be_visible()
        assert len(double.received) == 1


def test_a_vault_that_turned_the_servers_reflector_off_is_shown_the_command(
    context: BrowserContext, tmp_path: Path
) -> None:
    double = Provider()
    with (
        live_server(double) as provider_url,
        oauth_server_at(
            tmp_path / "server", reflector_url=provider_url, reflector_model="m"
        ) as server,
    ):
        api(server, "POST", "/v1/memory/consolidate/server", server.key, enabled=False)
        page = context.new_page()
        sign_in(page, server, server.key)
        expect(page.locator("pre.command")).to_contain_text("reflect --until-empty")
        assert page.get_by_role("button", name="Consolidate now").count() == 0
