"""What the consolidation loop (``mcp-memoryrouter reflect``) commits is the consolidator's
(``stored_by.surface``), with the key it runs with: against a real server on loopback, on
SQLite and PostgreSQL."""

from __future__ import annotations

from click.testing import CliRunner

from mcp_memoryrouter.cli import main
from tests.support.reflect import ModelProgram, Served


def test_reflections_the_loop_commits_are_stored_by_the_consolidator(
    served: Served, program: ModelProgram
) -> None:
    served.ingest(20, chars=80)
    done = CliRunner().invoke(
        main,
        ["reflect", "--api-url", served.url, "--model-cmd", program.command, "--until-empty"],
        env={"MEMORYROUTER_KEY": served.key, **program.env},
    )
    assert done.exit_code == 0, done.output
    with served.http() as http:
        (key,) = http.get("/v1/keys").json()["keys"]
        window = http.post(
            "/v1/memory/date-search", json={"from": "0001-01-01", "to": "9999-12-31"}
        ).json()["memories"]
    by_tier = {(row["tier"], row["stored_by"]["surface"]) for row in window}
    assert {(1, "rest"), (2, "consolidator")} <= by_tier  # and tier 3, when it ran that far
    assert {surface for tier, surface in by_tier if tier > 1} == {"consolidator"}
    assert {row["stored_by"]["key_id"] for row in window} == {key["id"]}
