"""What an import costs the vault in requests, whatever the order of its sessions, and where
an archive may go: plain lines and chat histories into any vault, an archive with lineage
into an empty one only, refused before anything is sent."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
from click.testing import CliRunner
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_memoryrouter.cli import main
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import Conflict
from mcp_memoryrouter.transfer.archive import read_archive
from mcp_memoryrouter.transfer.history import read_history
from mcp_memoryrouter.transfer.importer import (
    import_archive,
    import_history,
    plan_history,
)
from tests.support import Vault
from tests.support.reflect import Served

pytestmark = pytest.mark.anyio


class Counted:
    """The vault app, counting the requests it is sent by method and path."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.calls: list[tuple[str, str]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.calls.append((scope["method"], scope["path"]))
        await self.app(scope, receive, send)

    def sent(self, path: str) -> int:
        return sum(1 for _, called in self.calls if called == path)


def client_of(vault: Vault, counted: Counted) -> VaultClient:
    return VaultClient("http://vault", vault.key, transport=httpx2.ASGITransport(app=counted))


def sessions(vault: Vault) -> dict[str, int]:
    """How many raw memories each session holds."""
    found = vault.sql("SELECT session_id, COUNT(*) FROM memories GROUP BY session_id")
    return {str(session): count for session, count in found}


async def test_plain_lines_of_alternating_sessions_take_three_requests_per_1200(
    vault: Vault,
) -> None:
    lines = [
        json.dumps(
            {"content": f"Note {i}.", "date": "2026-03-01", "session_id": f"s-{'ab'[i % 2]}"}
        )
        for i in range(1_200)
    ]
    counted = Counted(vault.app)
    client = client_of(vault, counted)
    try:
        report = await import_archive(client, read_archive(lines))
    finally:
        await client.aclose()
    assert report.stored == 1_200
    assert counted.sent("/v1/memory/ingest") == 3
    assert sessions(vault) == {"s-a": 600, "s-b": 600}


async def test_a_history_of_many_short_conversations_takes_a_few_requests(
    vault: Vault,
) -> None:
    export = [
        {
            "uuid": f"c{n}",
            "created_at": "2024-05-02T09:00:00Z",
            "chat_messages": [
                {"sender": "human" if i % 2 == 0 else "assistant", "text": f"Turn {i} of {n}."}
                for i in range(4)
            ],
        }
        for n in range(300)
    ]
    counted = Counted(vault.app)
    client = client_of(vault, counted)
    try:
        report = await import_history(client, plan_history(read_history("claude", export)))
    finally:
        await client.aclose()
    assert report.stored == 1_200
    assert counted.sent("/v1/memory/ingest") == 3
    held = sessions(vault)
    assert len(held) == 300 and set(held.values()) == {4}
    assert held["claude-c7"] == 4


ARCHIVE: list[dict[str, object]] = [
    {"id": "m1", "content": "We chose Postgres.", "date": "2026-02-01", "consolidated": True},
    {"id": "m2", "content": "Auth goes first.", "date": "2026-02-02", "session_id": "s-1"},
    {"id": "r1", "tier": 2, "content": "Postgres.", "importance": 6, "sources": ["m1"]},
]


def archive_file(tmp_path: Path) -> Path:
    path = tmp_path / "vault.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in ARCHIVE), encoding="utf-8")
    return path


async def test_an_archive_with_lineage_into_a_vault_that_is_not_empty_is_refused_first(
    vault: Vault,
) -> None:
    vault.ingest("Already here.", date="2026-01-01")
    counted = Counted(vault.app)
    client = client_of(vault, counted)
    try:
        with pytest.raises(Conflict) as refused:
            await import_archive(client, read_archive(map(json.dumps, ARCHIVE)))
    finally:
        await client.aclose()
    assert refused.value.details == {"memories": 1}
    assert counted.calls == [("GET", "/v1/memory/stats")]  # nothing sent
    assert vault.sql("SELECT COUNT(*) FROM memories") == [(1,)]


async def test_plain_lines_import_into_a_vault_that_is_not_empty(vault: Vault) -> None:
    vault.ingest("Already here.", date="2026-01-01")
    plain = [
        {"content": "Also here.", "date": "2026-01-02"},
        {"content": "Already here.", "date": "2026-01-01"},  # the same message: a duplicate
    ]
    client = client_of(vault, Counted(vault.app))
    try:
        report = await import_archive(client, read_archive(map(json.dumps, plain)))
    finally:
        await client.aclose()
    assert (report.stored, report.duplicates) == (1, 1)
    assert vault.sql("SELECT COUNT(*) FROM memories") == [(2,)]


def test_the_command_says_the_archive_needs_an_empty_vault_and_what_to_do(
    served: Served, tmp_path: Path
) -> None:
    served.ingest(1)
    result = CliRunner().invoke(
        main,
        ["import", str(archive_file(tmp_path)), "--api-url", served.url],
        env={"MEMORYROUTER_KEY": served.key},
    )
    assert result.exit_code == 1
    assert "empty vault" in result.output and "keys create" in result.output
    assert "Traceback" not in result.output
    assert served.stats()["total_memories"] == 1
