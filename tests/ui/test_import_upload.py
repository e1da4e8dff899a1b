"""Tidy imports an uploaded export, the file its own download wrote: into an empty vault it
comes back whole, lineage included. A file that cannot be imported (not an export, too
large, or reflections for a vault that is not empty) changes nothing and says why. The form
works without a script and carries the session's token like every form."""

from __future__ import annotations

import json
import re
from pathlib import Path

from playwright.sync_api import BrowserContext, FilePayload, Page, expect

from mcp_memoryrouter import limits
from tests.support.oauth import OAuthServer
from tests.support.ui import Seeded, api, needs_browser, sign_in, stats

pytestmark = needs_browser


def tidy(context: BrowserContext, server: OAuthServer, *, script: bool = True) -> Page:
    page = context.new_page()
    if not script:
        page.route("**/explorer.js", lambda route: route.abort())
    sign_in(page, server, server.key)
    page.goto(server.base + "/ui/tidy")
    return page


def download(page: Page, into: Path) -> Path:
    with page.expect_download() as done:
        page.get_by_role("link", name="Download the export").click()
    path = into / "vault.ndjson"
    done.value.save_as(path)
    return path


def upload(page: Page, file: Path | FilePayload) -> None:
    page.get_by_label(re.compile("Export file")).set_input_files(file)
    page.get_by_role("button", name="Import the file").click()


def tiers(server: OAuthServer) -> dict[str, int]:
    return {t: v["count"] for t, v in stats(server, server.key)["tiers"].items()}


def test_an_export_uploaded_into_an_empty_vault_comes_back_whole(
    server: OAuthServer, seeded: Seeded, context: BrowserContext, tmp_path: Path
) -> None:
    page = tidy(context, server, script=False)
    exported = download(page, tmp_path)
    before = tiers(server)
    api(server, "DELETE", "/v1/memory", server.key)
    assert sum(tiers(server).values()) == 0
    page.reload()
    upload(page, exported)
    expect(page.get_by_role("status").first).to_have_text(
        f"Imported {before['1']} memories and rebuilt {before['2'] + before['3']} reflections."
    )
    assert page.url == server.base + "/ui/tidy"
    assert tiers(server) == before
    # the lineage came back: the tier-3 reflection walks down to the moments again
    top = api(server, "POST", "/v1/memory/date-search", server.key, **{"from": "2026-01-01"})
    (tier3,) = [row for row in top["memories"] if row["tier"] == 3]
    down = api(server, "POST", "/v1/memory/inspect", server.key, memory_id=tier3["id"])
    assert down["sources_total"] == 2 and len(down["sources"]) == 2


def test_a_file_that_is_not_an_export_is_refused_naming_its_line_and_stores_nothing(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = tidy(context, server)
    before = tiers(server)
    lines = json.dumps({"content": "a fine line"}) + "\nnot json at all\n"
    bad = FilePayload(name="notes.ndjson", mimeType="application/x-ndjson", buffer=lines.encode())
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        upload(page, bad)
    assert answer.value.status == 400
    expect(page.get_by_role("alert")).to_contain_text("Nothing was imported: line 2")
    latin = FilePayload(name="old.ndjson", mimeType="text/plain", buffer=b'{"content": "caf\xe9"}')
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        upload(page, latin)
    assert answer.value.status == 400
    expect(page.get_by_role("alert")).to_contain_text("not UTF-8")
    assert tiers(server) == before


def test_an_export_with_reflections_is_not_mixed_into_a_vault_that_holds_memories(
    server: OAuthServer, seeded: Seeded, context: BrowserContext, tmp_path: Path
) -> None:
    page = tidy(context, server)
    exported = download(page, tmp_path)
    before = tiers(server)
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        upload(page, exported)
    assert answer.value.status == 409
    expect(page.get_by_role("alert")).to_contain_text("goes into an empty vault")
    assert tiers(server) == before


def test_plain_messages_go_into_a_vault_that_holds_memories(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = tidy(context, server)
    before = tiers(server)
    messages = [{"content": f"Imported note {i}", "date": "2026-08-01"} for i in range(3)]
    body = "".join(json.dumps(m) + "\n" for m in messages).encode()
    upload(page, FilePayload(name="notes.ndjson", mimeType="application/x-ndjson", buffer=body))
    expect(page.get_by_role("status").first).to_have_text("Imported 3 memories.")
    assert tiers(server)["1"] == before["1"] + 3


def test_an_upload_over_the_cap_or_without_its_token_is_refused(
    server: OAuthServer, seeded: Seeded, context: BrowserContext
) -> None:
    page = tidy(context, server)
    csrf = page.locator('form.signout input[name="csrf"]').get_attribute("value") or ""
    before = tiers(server)
    line = json.dumps({"content": "x" * 1000}) + "\n"
    huge = (line * (limits.UI_IMPORT_MAX_BYTES // len(line) + 1)).encode()
    over = page.request.post(
        server.base + "/ui/import",
        multipart={
            "csrf": csrf,
            "file": FilePayload(name="big.ndjson", mimeType="application/x-ndjson", buffer=huge),
        },
    )
    assert over.status == 413
    assert "mcp-memoryrouter import" in over.text()
    small = FilePayload(name="a.ndjson", mimeType="application/x-ndjson", buffer=line.encode())
    forged = page.request.post(
        server.base + "/ui/import", multipart={"csrf": "not-the-token", "file": small}
    )
    assert forged.status == 403
    assert tiers(server) == before
