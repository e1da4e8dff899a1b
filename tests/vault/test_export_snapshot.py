"""An export is one snapshot, on both stores: it streams the vault as it was when its first
page was read, read page by page, whatever is written, consolidated or deleted meanwhile;
and an export the client abandons holds nothing once it is closed."""

from __future__ import annotations

import json
from collections.abc import Iterator

from mcp_memoryrouter.vault.http import render
from mcp_memoryrouter.vault.rules.domain import ExportedMemory
from mcp_memoryrouter.vault.service import EXPORT_PAGE
from tests.support import Vault


def exported(vault: Vault) -> list[dict[str, object]]:
    response = vault.http.get("/v1/memory/export", headers=vault.headers())
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines()]


def rendered(lines: Iterator[ExportedMemory]) -> list[dict[str, object]]:
    return [render.export_line(x) for x in lines]


def fill(vault: Vault, count: int) -> list[str]:
    texts = [f"Moment {i}: Ana fixed bug {i}." for i in range(count)]
    ids: list[str] = vault.ingest(*texts, session_id="s-1")["ids"]
    return ids


def test_writes_during_an_export_are_not_in_it_the_stream_is_the_vault_at_its_start(
    vault: Vault,
) -> None:
    ids = fill(vault, EXPORT_PAGE + 100)  # two pages
    before = exported(vault)
    lines = vault.service.export(vault.service.authenticate(vault.key))
    first = next(lines)  # the first page is read: the snapshot is taken

    vault.ingest("Written while the export streams.", date="2026-03-01T00:00:00Z")
    gone = {"ids": [ids[3], ids[EXPORT_PAGE + 50]]}  # one of each page
    assert vault.post("/v1/memory/delete-ids", gone).status_code == 200
    batch = vault.post("/v1/memory/consolidate/checkout", {"tier": 1, "max_tokens": 50_000})
    batch_id = batch.json()["batch_id"]
    entries = [{"text": "Ana fixes bugs.", "importance": 5}]
    body = {"batch_id": batch_id, "entries": entries}
    assert vault.post("/v1/memory/consolidate/commit", body).status_code == 200

    assert rendered(iter([first, *lines])) == before
    after = exported(vault)  # the next export sees every write
    assert len(after) == len(before) - 2 + 2 and after[-1]["tier"] == 2


def test_an_export_abandoned_after_its_first_line_holds_nothing_once_closed(
    vault: Vault,
) -> None:
    fill(vault, EXPORT_PAGE + 1)
    access = vault.service.authenticate(vault.key)
    for _ in range(6):  # more than the test store's connections (PostgreSQL: 4)
        lines = vault.service.export(access)
        next(lines)
        lines.close()
    assert vault.http.delete("/v1/memory", headers=vault.headers()).status_code == 200
    assert exported(vault) == []
