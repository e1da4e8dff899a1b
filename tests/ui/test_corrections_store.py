"""The links the explorer keeps between a correction and what it corrects, beside its
sessions: bound to a vault, newest first, forgotten with what they name. On SQLite and on
PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_memoryrouter.auth.state.database import PostgresPool
from mcp_memoryrouter.auth.state.sealing import Sealer
from mcp_memoryrouter.ui.corrections import Corrections
from mcp_memoryrouter.ui.sessions import UiSessions
from tests import pg


@pytest.fixture(params=pg.BACKENDS)
def links(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Corrections]:
    sealer = Sealer.in_dir(tmp_path)
    if request.param == "sqlite":
        sessions = UiSessions.in_dir(tmp_path, sealer)
        yield sessions.corrections()
        sessions.close()
        return
    databases: pg.Databases = request.getfixturevalue("postgres_databases")
    url = databases.create()
    pool = PostgresPool(url)
    try:
        yield UiSessions.postgres(pool, sealer).corrections()
    finally:
        pool.close()
        databases.release(url)


def test_links_are_per_vault_newest_first_and_forgotten_with_what_they_name(
    links: Corrections,
) -> None:
    links.link("vr_a", "old", ["fix1"], 1.0)
    links.link("vr_a", "old", ["fix2a", "fix2b"], 2.0)  # one correction kept in two parts
    links.link("vr_a", "old", ["fix1"], 3.0)  # stored again: a duplicate, linked once
    links.link("vr_b", "old", ["elsewhere"], 4.0)
    assert links.corrected_by("vr_a", "old") in (
        ["fix2a", "fix2b", "fix1"],
        ["fix2b", "fix2a", "fix1"],
    )
    assert links.corrects("vr_a", "fix1") == ["old"]
    assert links.corrects("vr_a", "elsewhere") == []
    links.forget("vr_a", "fix1")
    assert "fix1" not in links.corrected_by("vr_a", "old")
    links.forget_vault("vr_a")
    assert links.corrected_by("vr_a", "old") == []
    assert links.corrected_by("vr_b", "old") == ["elsewhere"]
