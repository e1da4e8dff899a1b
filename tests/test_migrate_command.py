"""``migrate`` upgrades everything the server stores, not the vault alone: the authorization
server's and the explorer's tables too (on SQLite, the files of theirs that exist)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcp_memoryrouter.auth.state.database import AUTH_MIGRATIONS
from mcp_memoryrouter.commands import main
from mcp_memoryrouter.db.migrations import migrate_sqlite
from mcp_memoryrouter.ui.sessions import MIGRATIONS as UI_MIGRATIONS

AUTH_LATEST = max(s.version for s in AUTH_MIGRATIONS.scripts("sqlite"))
UI_LATEST = max(s.version for s in UI_MIGRATIONS.scripts("sqlite"))


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MEMORYROUTER_DATABASE_URL", raising=False)
    monkeypatch.setenv("MEMORYROUTER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MEMORYROUTER_EMBEDDINGS", "none")
    return tmp_path


def migrate() -> dict[str, object]:
    result = CliRunner().invoke(main, ["migrate", "--json"])
    assert result.exit_code == 0, result.output
    answer: dict[str, object] = json.loads(result.output)
    return answer


def test_an_older_authorization_state_is_upgraded_and_keeps_its_rows(data_dir: Path) -> None:
    with sqlite3.connect(data_dir / "auth.sqlite3") as conn:
        assert migrate_sqlite(conn, AUTH_MIGRATIONS, until=1) == 1  # as an older release left it
        conn.execute(
            "INSERT INTO grants VALUES ('g1', 'an-app', 'vr_1', 'sealed', 'memories:read', "
            "'http://127.0.0.1:8787/mcp', 0, 0)"
        )
    conn.close()
    assert migrate()["state"] == {"oauth": AUTH_LATEST}
    with sqlite3.connect(data_dir / "auth.sqlite3") as conn:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        rows = conn.execute("SELECT id, client_id FROM oauth_grants").fetchall()
    conn.close()
    assert version == AUTH_LATEST and rows == [("g1", "an-app")]
    assert migrate()["state"] == {"oauth": AUTH_LATEST}  # and again: nothing to do


def test_the_explorers_file_is_upgraded_and_no_file_is_made(data_dir: Path) -> None:
    with sqlite3.connect(data_dir / "ui.sqlite3") as conn:
        migrate_sqlite(conn, UI_MIGRATIONS, until=0)
    conn.close()
    answer = migrate()
    assert answer["state"] == {"ui": UI_LATEST}
    assert not (data_dir / "auth.sqlite3").exists()  # a server makes it when it needs it


def test_the_words_name_each_part(data_dir: Path) -> None:
    (data_dir / "ui.sqlite3").touch()
    result = CliRunner().invoke(main, ["migrate"])
    assert result.exit_code == 0, result.output
    assert f"explorer tables at version {UI_LATEST}" in result.output
