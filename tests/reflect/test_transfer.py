"""``mcp-memoryrouter export`` and ``import`` against a real server."""

from __future__ import annotations

import json
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mcp_memoryrouter.cli import main
from tests import pg
from tests.support.reflect import ModelProgram, Served


# Every test here runs on SQLite, and on PostgreSQL when a server can be had (required in CI:
# MEMORYROUTER_TEST_POSTGRES=1): backups run the same SQL on both stores.
@pytest.fixture(params=pg.BACKENDS if pg.available() else ["sqlite"])
def store_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


def run(served: Served, *args: str, **env: str) -> Result:
    return CliRunner().invoke(
        main, [*args, "--api-url", served.url], env={"MEMORYROUTER_KEY": served.key, **env}
    )


def records(path: Path) -> set[Hashable]:
    """Each memory as its content: ids change on import, nothing else may."""
    lines = {line["id"]: line for line in map(json.loads, path.read_text().splitlines())}
    memo: dict[str, Hashable] = {}

    def record(memory_id: str) -> Hashable:
        if memory_id not in memo:
            line = lines[memory_id]
            covers = line.get("covers") or {}
            memo[memory_id] = (
                line["tier"],
                line["content"],
                line.get("role"),
                line.get("date"),
                line.get("session_id"),
                line.get("importance"),
                line.get("consolidated"),
                line.get("sources_deleted", 0),
                (covers.get("from"), covers.get("to")),
                frozenset(record(source) for source in line.get("sources", [])),
            )
        return memo[memory_id]

    return {record(memory_id) for memory_id in lines}


def write_lines(path: Path, *lines: Any) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def debt_of(served: Served) -> dict[str, Any]:
    unconsolidated: dict[str, Any] = served.stats()["reflection"]["unconsolidated"]
    return unconsolidated


def test_export_wipe_import_reproduces_texts_dates_tiers_importance_and_lineage(
    served: Served, program: ModelProgram, tmp_path: Path
) -> None:
    long_ids = served.ingest(1, chars=3000)  # split by the vault into several units
    raw_ids = served.ingest(600, first=1)
    model = ["--model-cmd", program.command]
    env = program.env
    tier1 = run(
        served, "reflect", "--tier", "1", "--until-empty", "--max-tokens", "5000", *model, **env
    )
    assert tier1.exit_code == 0, tier1.output
    tier2 = run(served, "reflect", "--tier", "2", "--max-batches", "2", *model, **env)
    assert tier2.exit_code == 0, tier2.output
    served.ingest(40, first=5000)  # raw memories nobody consolidated yet
    with served.http() as http:
        in_session = [{"content": f"Session note {i}.", "date": "2026-05-01"} for i in range(3)]
        body = {"messages": in_session, "session_id": "s-7"}
        assert http.post("/v1/memory/ingest", json=body).status_code == 202
        # sources deleted since: their reflections keep their coverage and count them
        gone = {"ids": [*long_ids, raw_ids[7]]}
        assert http.post("/v1/memory/delete-ids", json=gone).status_code == 200
        # a batch's reflections deleted since: its sources stay consolidated, named by none
        source = http.post("/v1/memory/inspect", json={"memory_id": raw_ids[-1]}).json()
        batch = [r["id"] for r in source["consolidated_into"]]
        assert batch and http.post("/v1/memory/delete-ids", json={"ids": batch}).status_code == 200
    stats = served.stats()
    assert stats["tiers"]["3"]["count"] > 0 and len(long_ids) > 1

    first = tmp_path / "first.jsonl"
    exported = run(served, "export", "--output", str(first))
    assert exported.exit_code == 0, exported.output
    assert len(first.read_text().splitlines()) == stats["total_memories"]
    lines = [json.loads(line) for line in first.read_text().splitlines()]
    named = {source for line in lines for source in line.get("sources", [])}
    orphans = [x for x in lines if x["tier"] == 1 and x["consolidated"] and x["id"] not in named]
    assert orphans  # consolidated by the deleted reflection
    assert any(x.get("sources_deleted") for x in lines if x["tier"] == 2)
    assert {x["session_id"] for x in lines if x.get("session_id")} == {"s-7"}
    with served.http() as http:
        assert http.delete("/v1/memory").status_code == 200
    assert served.stats()["total_memories"] == 0

    imported = run(served, "import", str(first), "--json")
    assert imported.exit_code == 0, imported.output
    counts = json.loads(imported.stdout)
    assert counts["reflections"] == {
        "2": stats["tiers"]["2"]["count"],
        "3": stats["tiers"]["3"]["count"],
    }
    second = tmp_path / "second.jsonl"
    assert run(served, "export", "--output", str(second)).exit_code == 0

    assert records(second) == records(first)
    assert debt_of(served) == stats["reflection"]["unconsolidated"]
    assert {k: v["count"] for k, v in served.stats()["tiers"].items()} == {
        k: v["count"] for k, v in stats["tiers"].items()
    }


def test_plain_messages_are_imported_in_requests_of_at_most_500(
    served: Served, tmp_path: Path
) -> None:
    lines = [
        {"content": f"Note {i}.", "date": f"2026-03-{1 + i % 28:02d}", "role": "assistant"}
        for i in range(1200)
    ]
    lines[5] = {"content": "No date, no role."}
    lines[6] = {
        "content": "In a session.",
        "session_id": "s-1",
        "date": "2026-03-02T10:00:00+02:00",
    }
    result = run(served, "import", str(write_lines(tmp_path / "in.jsonl", *lines)), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["stored"] == 1200
    with served.http() as http:
        usage = http.get("/v1/usage").json()
        in_session = http.post(
            "/v1/memory/date-search",
            json={"from": "2026-03-01", "to": "2026-03-03", "session_id": "s-1", "tiers": [1]},
        ).json()
    # lines 1-500 (line 7 in a session of its own: metered apart) | 501-1000 | 1001-1200
    assert usage["by_endpoint"]["ingest"]["events"] == 4
    assert usage["by_session"]["s-1"]["events"] == 1
    assert [m["date"] for m in in_session["memories"]] == ["2026-03-02T08:00:00.000Z"]


def test_a_bad_line_stops_the_import_before_anything_is_sent_naming_the_line(
    served: Served, tmp_path: Path
) -> None:
    good = {"content": "Fine.", "date": "2026-02-01"}
    for bad, field in [
        ("{not json", "not valid JSON"),
        ({"date": "2026-02-01"}, "content"),
        ({"content": "x", "date": "yesterday"}, "date"),
        ({"content": "x", "role": "robot"}, "role"),
        ({"content": "x", "contnet": "typo"}, "contnet"),
        ({"tier": 2, "content": "r", "importance": 7.0, "sources": ["a"]}, "importance"),
        ({"tier": 2, "content": "r", "importance": 7, "sources": ["nowhere"]}, "nowhere"),
        ({"tier": 2, "content": "r", "importance": 7}, "sources or covers"),
    ]:
        path = write_lines(tmp_path / "bad.jsonl", {"id": "a", **good}, good, bad)
        result = run(served, "import", str(path))
        assert result.exit_code == 1, (bad, result.output)
        assert "line 3" in result.output and field in result.output, result.output
    assert served.stats()["total_memories"] == 0


def test_a_source_can_belong_to_one_batch_only(served: Served, tmp_path: Path) -> None:
    raw = {"id": "a", "content": "Fine.", "date": "2026-02-01"}
    one = {"tier": 2, "content": "First.", "importance": 5, "sources": ["a"]}
    other = {
        "tier": 2,
        "content": "Other.",
        "importance": 5,
        "sources": ["a", "a"],
        "covers": {"from": "2026-01-01", "to": "2026-02-01"},
    }
    result = run(served, "import", str(write_lines(tmp_path / "in.jsonl", raw, one, other)))
    assert result.exit_code == 1 and "line 3" in result.output
    assert served.stats()["total_memories"] == 0


def test_a_long_source_split_by_the_vault_keeps_lineage_to_every_unit(
    served: Served, tmp_path: Path
) -> None:
    long_text = " ".join(f"Sentence {i} about the migration plan." for i in range(120))
    lines = [
        {"content": "Short one.", "date": "2026-02-01"},
        {"id": "long", "content": long_text, "date": "2026-02-02"},
        {
            "id": "r",
            "tier": 2,
            "content": "The migration plan.",
            "importance": 6,
            "sources": ["long"],
        },
    ]
    result = run(served, "import", str(write_lines(tmp_path / "in.jsonl", *lines)), "--json")
    assert result.exit_code == 0, result.output
    stats = served.stats()
    units = stats["tiers"]["1"]["count"] - 1
    assert units > 1 and json.loads(result.stdout)["stored"] == units + 1
    assert stats["reflection"]["unconsolidated"]["raw"]["units"] == 1  # only "Short one."
    exported = tmp_path / "out.jsonl"
    assert run(served, "export", "-o", str(exported)).exit_code == 0
    (reflection,) = [
        x for x in map(json.loads, exported.read_text().splitlines()) if x["tier"] == 2
    ]
    assert len(reflection["sources"]) == units
    assert reflection["covers"] == {
        "from": "2026-02-02T00:00:00.000Z",
        "to": "2026-02-02T00:00:00.000Z",
    }


def test_a_message_too_large_for_one_request_is_refused_before_anything_is_sent(
    served: Served, tmp_path: Path
) -> None:
    lines = [{"content": "Fine.", "date": "2026-02-01"}, {"content": "x" * 900_000}]
    result = run(served, "import", str(write_lines(tmp_path / "in.jsonl", *lines)))
    assert result.exit_code == 1 and "line 2" in result.output
    assert served.stats()["total_memories"] == 0
