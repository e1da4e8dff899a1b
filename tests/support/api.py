"""The vault's REST API as the tests call it: the error envelope, the consolidation steps."""

from __future__ import annotations

from typing import Any

import httpx2

from tests.support import Vault


def assert_envelope(response: httpx2.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code


CHECKOUT = "/v1/memory/consolidate/checkout"
COMMIT = "/v1/memory/consolidate/commit"


def seed(vault: Vault, count: int, chars: int = 40) -> list[str]:
    """``count`` raw memories a second apart, written in one ingest; their ids in order."""
    messages = [
        {
            "role": "user",
            "content": f"memory number {i:05d} " + "x" * max(0, chars - 20),
            "date": f"2026-02-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z",
        }
        for i in range(count)
    ]
    response = vault.post("/v1/memory/ingest", {"messages": messages})
    assert response.status_code == 202, response.text
    ids: list[str] = response.json()["ids"]
    assert len(ids) == count
    return ids


def checkout(vault: Vault, **body: Any) -> dict[str, Any]:
    response = vault.post(CHECKOUT, {"tier": 1, **body})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def commit(vault: Vault, batch_id: str, entries: list[dict[str, Any]] | None = None) -> Any:
    entries = entries or [{"text": "A reflection about the batch.", "importance": 6}]
    return vault.post(COMMIT, {"batch_id": batch_id, "entries": entries})
