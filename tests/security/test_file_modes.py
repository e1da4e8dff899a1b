"""Memories on disk are the server user's alone: under a permissive umask the data directory
is 0700 and every file the server creates in it (databases, their WAL and shared-memory
files, the owner lock, key files) 0600; files an earlier version left wider are narrowed."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from cryptography.fernet import Fernet

from tests.support.oauth import OAuthServer, call_mcp, grant_tokens, oauth_server_at


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def modes(data_dir: Path) -> dict[str, int]:
    """Every entry under ``data_dir`` (and the directory itself, as ".") by its mode."""
    found = {".": stat.S_IMODE(data_dir.stat().st_mode)}
    for path in data_dir.rglob("*"):
        found[str(path.relative_to(data_dir))] = stat.S_IMODE(path.stat().st_mode)
    return found


def assert_private(data_dir: Path) -> None:
    found = modes(data_dir)
    wider = {
        name: oct(mode)
        for name, mode in found.items()
        if mode != (0o700 if (data_dir / name).is_dir() else 0o600)
    }
    assert wider == {}, found


async def use_everything(server: OAuthServer) -> None:
    """Store memories over REST, run the OAuth flow, store one more through /mcp."""
    stored = httpx2.post(
        server.base + "/v1/memory/ingest",
        json={"messages": [{"content": "The launch code word is heliotrope."}]},
        headers={"X-Memory-Key": server.key},
    )
    assert stored.status_code == 202, stored.text
    _, tokens = await grant_tokens(server)
    response = call_mcp(server, tokens["access_token"], "store_memory", content="Ana likes tea.")
    assert response.status_code == 200, response.text


@pytest.mark.anyio
async def test_a_fresh_data_dir_and_every_file_in_it_are_private(
    tmp_path: Path, permissive_umask: None
) -> None:
    data_dir = tmp_path / "data"
    with oauth_server_at(data_dir) as server:
        await use_everything(server)
        names = set(modes(data_dir))
        assert {"vault.sqlite3-wal", "vault.sqlite3-shm", "auth.sqlite3-wal"} <= names
        assert "vault.sqlite3.owner" in names
        assert {"oauth-signing-key.json", "oauth-sealing.key", "mcp-request-state.key"} <= names
        assert_private(data_dir)
    assert_private(data_dir)


@pytest.mark.anyio
async def test_a_data_dir_left_readable_by_others_is_narrowed_at_start(
    tmp_path: Path, permissive_umask: None
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    held = []
    for name in ("vault.sqlite3", "auth.sqlite3"):
        conn = sqlite3.connect(data_dir / name)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE leftover (x)")
        held.append(conn)  # open, so its WAL and shared-memory files stay (0644)
    (data_dir / "oauth-sealing.key").write_bytes(Fernet.generate_key())
    assert stat.S_IMODE((data_dir / "vault.sqlite3").stat().st_mode) == 0o644
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o755
    assert stat.S_IMODE((data_dir / "auth.sqlite3-wal").stat().st_mode) == 0o644
    try:
        with oauth_server_at(data_dir) as server:
            await use_everything(server)
            assert_private(data_dir)
    finally:
        for conn in held:
            conn.close()
