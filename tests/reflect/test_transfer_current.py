"""Facts that stay current survive ``mcp-memoryrouter export`` and ``import``: a standing
preference keeps its ``kind``, and a reflection a later one replaced stays ``superseded`` by
it (the same time, the new id of the same reflection), so search and prepare rank the vault
as they did. Against a real server, on SQLite and on PostgreSQL when one can be had."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import pg
from tests.reflect.test_transfer import run, write_lines
from tests.support.reflect import Served

BOSTON = "Ana lives in Boston, in a flat near the harbour, with her two cats."
DENVER = "Ana moved from Boston to Denver in June 2026; the two cats came along."
METRIC = "Always give distances and weights in metric units."


@pytest.fixture(params=pg.BACKENDS if pg.available() else ["sqlite"])
def store_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


def post(served: Served, path: str, **body: Any) -> Any:
    with served.http() as http:
        response = http.post(path, json=body)
    assert response.status_code < 300, response.text
    return response.json()


def reflect(served: Served, said: str, day: str, entry: dict[str, Any]) -> str:
    message = {"role": "user", "content": said, "date": f"{day}T10:00:00Z"}
    post(served, "/v1/memory/ingest", messages=[message])
    batch = post(served, "/v1/memory/consolidate/checkout", tier=1, contract=2)
    done = post(
        served, "/v1/memory/consolidate/commit", batch_id=batch["batch_id"], entries=[entry]
    )
    created: str = done["created"][0]["id"]
    return created


def current_facts(path: Path) -> set[tuple[str, str | None, str | None, str | None]]:
    """Each reflection as (its text, its kind, when it was replaced, by which text)."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    text = {line["id"]: line["content"] for line in lines}
    return {
        (
            line["content"],
            line.get("kind"),
            (line.get("superseded") or {}).get("at"),
            text.get((line.get("superseded") or {}).get("by", "")),
        )
        for line in lines
        if line["tier"] > 1
    }


def test_kind_and_superseded_survive_export_wipe_import(served: Served, tmp_path: Path) -> None:
    reflect(
        served,
        "Please always use metric units.",
        "2026-01-02",
        {"text": METRIC, "importance": 8, "kind": "preference"},
    )
    old = reflect(
        served,
        "Ana lives in Boston with her cats.",
        "2026-01-05",
        {"text": BOSTON, "importance": 6},
    )
    reflect(
        served,
        "Ana moved to Denver in June.",
        "2026-06-05",
        {"text": DENVER, "importance": 7, "replaces": ["R1"]},
    )
    assert post(served, "/v1/memory/inspect", memory_id=old)["superseded"]
    first = tmp_path / "first.jsonl"
    assert run(served, "export", "--output", str(first)).exit_code == 0
    before = current_facts(first)
    assert (METRIC, "preference", None, None) in before
    (replaced,) = [f for f in before if f[0] == BOSTON]
    assert replaced[2] and replaced[3] == DENVER

    with served.http() as http:
        assert http.delete("/v1/memory").status_code == 200
    imported = run(served, "import", str(first))
    assert imported.exit_code == 0, imported.output
    second = tmp_path / "second.jsonl"
    assert run(served, "export", "--output", str(second)).exit_code == 0
    assert current_facts(second) == before
    assert served.stats()["preferences"] == 1
    rows = post(served, "/v1/memory/search", query="Ana Boston harbour cats", tiers=[2])
    assert [r["content"] for r in rows["memories"]][:2] == [DENVER, BOSTON]


def test_a_superseded_by_that_is_no_later_reflection_is_refused_naming_the_line(
    served: Served, tmp_path: Path
) -> None:
    moment = {
        "id": "m1",
        "tier": 1,
        "role": "user",
        "content": "Hi.",
        "date": "2026-01-01T00:00:00Z",
    }
    reflection = {
        "id": "r1",
        "tier": 2,
        "content": BOSTON,
        "importance": 6,
        "sources": ["m1"],
        "superseded": {"at": "2026-06-05T10:00:00.000Z", "by": "m1"},
    }
    path = write_lines(tmp_path / "bad.jsonl", moment, reflection)
    result = run(served, "import", str(path))
    assert result.exit_code != 0
    assert "line 2" in result.output and "superseded.by" in result.output
    assert served.stats()["total_memories"] == 0


def test_an_import_naming_no_reflection_as_replaced_is_404_and_writes_nothing(
    served: Served,
) -> None:
    post(
        served,
        "/v1/memory/ingest",
        messages=[{"role": "user", "content": "Hi.", "date": "2026-01-01T00:00:00Z"}],
    )
    gone = {"id": "00000000-0000-4000-8000-000000000000", "at": "2026-06-05", "entry": 0}
    body: dict[str, Any] = {
        "tier": 2,
        "entries": [{"text": DENVER, "importance": 7}],
        "covers": {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
        "replaced": [gone],
    }
    with served.http() as http:
        refused = http.post("/v1/memory/import-reflections", json=body)
        assert refused.status_code == 404, refused.text  # as an unknown source id
        assert refused.json()["error"]["details"] == {"field": "replaced[0].id"}
        past = {**body, "replaced": [{**gone, "entry": 1}]}
        refused = http.post("/v1/memory/import-reflections", json=past)
        assert refused.status_code == 404, refused.text
        assert refused.json()["error"]["details"] == {"field": "replaced[0].entry"}
    assert served.stats()["tiers"]["2"]["count"] == 0
