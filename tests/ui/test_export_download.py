"""The explorer's export download over real HTTP: the whole vault, one record a line, whatever
characters its memories hold."""

from __future__ import annotations

import json

from tests.support.oauth import OAuthServer
from tests.support.reflect import EVERY
from tests.support.ui import api, signed_in


def test_the_download_holds_every_memory_whatever_line_separators_it_holds(
    server: OAuthServer,
) -> None:
    sent = {(f"before {char} after", f"s{char}id") for char in EVERY}
    sent.add((f"all of them: {EVERY} end", f"all{EVERY}"))
    for content, session in sent:
        message = {"content": content, "date": "2026-02-01"}
        api(server, "POST", "/v1/memory/ingest", server.key, messages=[message], session_id=session)
    with signed_in(server, server.key) as browser:
        download = browser.get("/ui/export")
    assert download.status_code == 200
    assert download.headers["content-type"] == "application/x-ndjson"
    lines = download.content.decode("utf-8").split("\n")
    assert lines[-1] == ""
    records = [json.loads(line) for line in lines[:-1]]
    assert {(r["content"], r.get("session_id")) for r in records} == sent
