"""``import --from server-memory|mem0|basic-memory|letta`` and ``export --to
server-memory|markdown`` against a real server on loopback, whose vault embeds by meaning
(``ConceptEmbedder``: "car" and "automobile" share an axis).

The fixtures (``fixtures/moving/``) are written from each product's own code:

- ``memory.jsonl``: modelcontextprotocol/servers, ``src/memory/index.ts``
  (``KnowledgeGraphManager.saveGraph``: ``JSON.stringify({type: "entity", ...})`` lines, then
  the relations, joined by ``\\n``); entities with and without observations, relations both
  ways;
- ``openmemory-memories.json`` and ``openmemory-memories.jsonl``: mem0ai/mem0,
  ``openmemory/api/app/routers/backup.py`` (``_export_sqlite`` and
  ``_export_logical_memories_gz``, zipped by ``export_backup``); active, paused, archived and
  deleted memories of two apps, with categories;
- ``mem0-get-all.json``: mem0ai/mem0, ``mem0/memory/main.py`` (``Memory.get_all``: ``results``
  of ``MemoryItem`` with the promoted ``user_id``, ``agent_id``, ``run_id``); a memory
  without a date;
- ``basic-memory/``: basicmachines-co/basic-memory, ``docs/NOTE-FORMAT.md`` and its markdown
  parser (front matter, ``- [category] text #tag (context)``, ``- relation [[Target]]``, a
  task line, fenced code); a note without front matter in a subfolder;
- ``letta/``: letta-ai/letta, ``letta/schemas/agent_file.py`` (``AgentFileSchema``: agents with
  ``block_ids`` and ``messages``, ``blocks``), with a memgpt agent's wrapped user message,
  login, heartbeat, ``send_message`` call and tool return; and letta-ai/letta-code's memory
  filesystem (``memory/system/*.md`` with ``description`` front matter).
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from mcp_memoryrouter.cli import main
from mcp_memoryrouter.reflect.cli import commands
from mcp_memoryrouter.reflect.cli import moved_in as moving_cli
from mcp_memoryrouter.transfer import moving
from mcp_memoryrouter.vault.search.embeddings import Embedders
from tests.support import StoreFactory, live_server, make_vault
from tests.support.reflect import Served, connection_dropped_after_one_ingest, stored
from tests.vault.embedders import ConceptEmbedder

FIXTURES = Path(__file__).parent / "fixtures" / "moving"
GRAPH = FIXTURES / "memory.jsonl"


IMPORT_DAY_S = 1_796_558_400  # 2026-12-06 12:00 UTC: the day the undated records take


@pytest.fixture(autouse=True)
def import_day(monkeypatch: pytest.MonkeyPatch) -> None:
    """The import's clock, on one day: an undated record takes the import's instant, and its
    vector encodes that day's words, so which of an entity's close observations a query
    finds first must not depend on the day the tests run. Each import is a second later
    than the one before, as runs are."""
    ticks = itertools.count(IMPORT_DAY_S)
    monkeypatch.setattr(moving_cli, "time", SimpleNamespace(time=lambda: float(next(ticks))))


@pytest.fixture
def served(tmp_path: Path, new_store: StoreFactory) -> Iterator[Served]:
    embedders = Embedders({"concepts": ConceptEmbedder}, "concepts")
    vault = make_vault(tmp_path, store=new_store, embedders=embedders)
    with live_server(vault.app) as url:
        yield Served(vault, url)
    vault.http.close()
    vault.store.close()


def run(served: Served, command: str, *args: str) -> Result:
    return CliRunner().invoke(
        main, [command, *args, "--api-url", served.url], env={"MEMORYROUTER_KEY": served.key}
    )


def moved_in(served: Served, product: str, path: Path) -> dict[str, Any]:
    result = run(served, "import", "--from", product, str(path), "--json")
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def by_meaning(served: Served, query: str) -> list[str]:
    """The best matches of ``query`` (those of the top score: the vault ranks a hit's
    neighbours in its session with it), searched once the vault embedded what it holds."""
    served.vault.worker.drain()
    with served.http() as http:
        body = http.post("/v1/memory/search", json={"query": query, "limit": 5}).json()
    top = body["memories"][0]["score"]
    return [str(m["content"]) for m in body["memories"] if m["score"] == top]


def assert_refused_whole(served: Served, product: str, path: Path, *named: str) -> None:
    """Refused before anything is sent, naming what is wrong: the vault stays empty."""
    result = run(served, "import", "--from", product, str(path))
    assert result.exit_code == 1, result.output
    for name in named:
        assert name in result.output
    assert served.stats()["total_memories"] == 0


# --- server-memory ------------------------------------------------------------------------


def test_server_memory_entities_observations_and_relations_become_one_session_per_entity(
    served: Served,
) -> None:
    report = moved_in(served, "server-memory", GRAPH)
    assert report["records"] == 6 and report["sessions"] == 3
    assert report["stored"] == 10 and report["duplicates"] == 0
    assert report["undated"] == 10 and report["import_date"] is not None
    day = report["import_date"]
    assert stored(served) == [
        ("server-memory-John_Smith", "observation", "John_Smith (person)", day),
        (
            "server-memory-John_Smith",
            "observation",
            "John_Smith (person): Speaks fluent Spanish",
            day,
        ),
        ("server-memory-John_Smith", "observation", "John_Smith (person): Graduated in 2019", day),
        (
            "server-memory-John_Smith",
            "observation",
            "John_Smith (person): Drives an old car to work",
            day,
        ),
        ("server-memory-John_Smith", "observation", "John_Smith works at Anthropic", day),
        ("server-memory-John_Smith", "observation", "John_Smith lives in Lisbon", day),
        ("server-memory-Anthropic", "observation", "Anthropic (organization)", day),
        (
            "server-memory-Anthropic",
            "observation",
            "Anthropic (organization): Builds AI assistants",
            day,
        ),
        ("server-memory-Anthropic", "observation", "Anthropic employs John_Smith", day),
        ("server-memory-Lisbon", "observation", "Lisbon (city)", day),
    ]
    assert "John_Smith (person): Drives an old car to work" in by_meaning(served, "automobile")


def test_server_memory_summary_says_the_import_dated_what_the_file_does_not(served: Served) -> None:
    result = run(served, "import", "--from", "server-memory", str(GRAPH))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        "imported 10 memories from 3 entities of server-memory (0 duplicates); "
        "10 memories without a date in the file took the import's ("
    )


def test_server_memory_imported_again_stores_nothing_on_the_first_import_date(
    served: Served,
) -> None:
    first = moved_in(served, "server-memory", GRAPH)
    again = moved_in(served, "server-memory", GRAPH)
    assert again["stored"] == 0 and again["duplicates"] == 10
    assert again["dated_earlier"] == 10 and again["import_date"] is None
    assert served.stats()["total_memories"] == 10
    assert {date for *_, date in stored(served)} == {first["import_date"]}


def test_server_memory_round_trips_to_the_same_file(served: Served, tmp_path: Path) -> None:
    moved_in(served, "server-memory", GRAPH)
    out = tmp_path / "memory.jsonl"
    result = run(served, "export", "--to", "server-memory", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "exported 3 entities and 3 relations" in result.stderr
    assert out.read_bytes() == GRAPH.read_bytes()


def test_a_malformed_graph_is_refused_naming_its_line_and_nothing_is_sent(
    served: Served, tmp_path: Path
) -> None:
    lines = GRAPH.read_text().split("\n")
    broken = tmp_path / "memory.jsonl"
    broken.write_text("\n".join([*lines[:2], '{"type":"entity","name":"Ana"', *lines[2:]]))
    assert_refused_whole(served, "server-memory", broken, "memory.jsonl, line 3", "not JSON")
    missing = tmp_path / "missing.jsonl"
    missing.write_text("\n".join([*lines, '{"type":"relation","from":"Ana","to":"Acme"}']))
    assert_refused_whole(served, "server-memory", missing, "line 7", "relationType")


def test_an_interrupted_import_run_again_stores_only_the_rest(
    served: Served, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # 300 entities of one observation: 600 memories, a request of 500 then one of 100
    graph = tmp_path / "memory.jsonl"
    entity = {"type": "entity", "entityType": "person"}
    graph.write_text(
        "\n".join(
            json.dumps({**entity, "name": f"P{n}", "observations": [f"Likes number {n}"]})
            for n in range(300)
        )
    )
    with connection_dropped_after_one_ingest(monkeypatch):
        cut = run(served, "import", "--from", "server-memory", str(graph))
    assert cut.exit_code == 1 and "the connection dropped" in cut.output
    assert served.stats()["total_memories"] == 500

    resumed = moved_in(served, "server-memory", graph)
    assert resumed["stored"] == 100 and resumed["duplicates"] == 500
    assert served.stats()["total_memories"] == 600
    # the sessions the first run reached keep its date; those it never reached take the
    # second run's: a third run finds every one of them
    assert len({date for *_, date in stored(served)}) == 2
    third = moved_in(served, "server-memory", graph)
    assert third["stored"] == 0 and third["duplicates"] == 600


# --- mem0 and OpenMemory ------------------------------------------------------------------


def openmemory_zip(path: Path) -> Path:
    """The zip OpenMemory's ``POST /api/v1/backup/export`` answers."""
    lines = (FIXTURES / "openmemory-memories.jsonl").read_bytes()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("memories.json", (FIXTURES / "openmemory-memories.json").read_bytes())
        archive.writestr("memories.jsonl.gz", gzip.compress(lines))
    return path


OPENMEMORY_STORED = [
    (
        "mem0-alice-openmemory",
        "observation",
        "Is vegetarian and avoids dairy (mem0: user alice, app openmemory; categories: food, "
        "preferences)",
        "2025-03-14T09:30:00.123Z",
    ),
    (
        "mem0-alice-openmemory",
        "observation",
        "Used to have a cat named Miso (mem0: user alice, app openmemory; categories: pets)",
        "2024-11-20T07:00:00.000Z",
    ),
    (
        "mem0-alice-cursor",
        "observation",
        "Is planning a trip to Berlin in May (mem0: user alice, app cursor; categories: travel)",
        "2025-04-02T18:05:41.000Z",
    ),
    (
        "mem0-alice-cursor",
        "observation",
        "Prefers dark mode in every editor (mem0: user alice, app cursor; categories: preferences)",
        "2025-05-01T08:15:00.000Z",
    ),
]


def test_openmemory_backup_zip_keeps_user_app_categories_and_dates_and_skips_deleted(
    served: Served, tmp_path: Path
) -> None:
    report = moved_in(served, "mem0", openmemory_zip(tmp_path / "memories_export_alice.zip"))
    assert report["records"] == 5 and report["skipped"] == {"deleted memories": 1}
    assert report["stored"] == 4 and report["undated"] == 0 and report["import_date"] is None
    assert sorted(stored(served)) == sorted(OPENMEMORY_STORED)
    assert OPENMEMORY_STORED[2][2] in by_meaning(served, "germany")
    again = moved_in(served, "mem0", openmemory_zip(tmp_path / "again.zip"))
    assert again["stored"] == 0 and again["duplicates"] == 4


def test_openmemory_lines_alone_name_the_app(served: Served, tmp_path: Path) -> None:
    gz = tmp_path / "memories.jsonl.gz"
    gz.write_bytes(gzip.compress((FIXTURES / "openmemory-memories.jsonl").read_bytes()))
    report = moved_in(served, "mem0", gz)
    assert report["stored"] == 4 and report["skipped"] == {"deleted memories": 1}
    assert {session for session, *_ in stored(served)} == {"mem0-openmemory", "mem0-cursor"}


def test_mem0_get_all_keeps_user_agent_and_run_and_dates_an_undated_memory_at_import(
    served: Served,
) -> None:
    report = moved_in(served, "mem0", FIXTURES / "mem0-get-all.json")
    assert report["stored"] == 4 and report["undated"] == 1
    rows = {content: (session, date) for session, _, content, date in stored(served)}
    assert rows["Works as a physician at a hospital in Porto (mem0: user bob)"] == (
        "mem0-bob",
        "2025-01-05T18:02:11.123Z",  # -08:00 in UTC
    )
    assert rows["Likes to hike on weekends (mem0: user bob, run trip-planning)"][0] == (
        "mem0-bob-trip-planning"
    )
    assert rows["Answers in short bullet points (mem0: agent travel-bot; categories: style)"][
        0
    ] == ("mem0-travel-bot")
    assert (
        rows["Is allergic to peanuts (mem0: user bob; categories: health)"][1]
        == (report["import_date"])
    )
    assert "Works as a physician at a hospital in Porto (mem0: user bob)" in by_meaning(
        served, "doctor"
    )


def test_a_malformed_mem0_export_is_refused_naming_the_memory_or_line(
    served: Served, tmp_path: Path
) -> None:
    value = json.loads((FIXTURES / "mem0-get-all.json").read_text())
    value["results"][2]["created_at"] = "last tuesday"
    bad_date = tmp_path / "get_all.json"
    bad_date.write_text(json.dumps(value))
    assert_refused_whole(served, "mem0", bad_date, "memory 3", "created_at", "last tuesday")
    lines = (FIXTURES / "openmemory-memories.jsonl").read_text().splitlines()
    lines[1] = lines[1][:40]
    cut = tmp_path / "memories.jsonl"
    cut.write_text("\n".join(lines))
    assert_refused_whole(served, "mem0", cut, "memories.jsonl, line 2", "not JSON")
    pretty = (
        (FIXTURES / "mem0-get-all.json").read_text().replace('"memory": "Likes', '"memory" "Likes')
    )
    (tmp_path / "pretty.json").write_text(pretty)
    line = pretty[: pretty.index('"memory" "Likes')].count("\n") + 1
    assert_refused_whole(served, "mem0", tmp_path / "pretty.json", f"pretty.json, line {line}")


# --- basic-memory -------------------------------------------------------------------------


def test_basic_memory_notes_become_observations_relations_and_prose_one_session_per_note(
    served: Served,
) -> None:
    report = moved_in(served, "basic-memory", FIXTURES / "basic-memory")
    assert report["records"] == 2 and report["sessions"] == 2 and report["stored"] == 9
    assert report["undated"] == 3  # Marta's note has no front matter
    coffee = [row for row in stored(served) if row[0] == "basic-memory-coffee-brewing-methods"]
    assert [content for _, _, content, _ in coffee] == [
        "Coffee Brewing Methods: [method] Pour over provides more flavor clarity than French press",
        "Coffee Brewing Methods: [technique] Water temperature at 205°F extracts optimal "
        "compounds #brewing",
        "Coffee Brewing Methods: [preference] Ethiopian beans work well with lighter roasts "
        "(personal experience)",
        "Coffee Brewing Methods relates to Coffee Bean Origins",
        "Coffee Brewing Methods requires Proper Grinding Technique",
        "Coffee Brewing Methods\n\nNotes from a month of trying every method at home.\n\n"
        "- [ ] buy a gooseneck kettle\n\n```text\n- [not] an observation inside code\n```",
    ]
    assert {date for *_, date in coffee} == {"2025-02-03T08:00:00.000Z"}
    assert "Marta\n\nMarta is a physician in Lisbon and a very joyful person." in by_meaning(
        served, "doctor"
    )
    again = moved_in(served, "basic-memory", FIXTURES / "basic-memory")
    assert again["stored"] == 0 and again["duplicates"] == 9


def test_a_note_with_broken_front_matter_is_refused_naming_file_and_line(
    served: Served, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    shutil.copytree(FIXTURES / "basic-memory", notes)
    (notes / "broken.md").write_text("---\ntitle: Broken\ntags: [a, b\n---\n\nBody\n")
    assert_refused_whole(served, "basic-memory", notes, "broken.md, line", "not YAML")
    (notes / "broken.md").write_text("---\ntitle: Never closed\n\nBody\n")
    assert_refused_whole(served, "basic-memory", notes, "broken.md, line 1", "never closed")


# --- Letta --------------------------------------------------------------------------------


def test_letta_core_memory_is_kept_apart_from_the_conversation(served: Served) -> None:
    report = moved_in(served, "letta", FIXTURES / "letta")
    assert report["skipped"] == {
        "empty memory blocks": 1,
        "system and tool messages, inner thoughts": 4,  # system, login, tool, heartbeat
    }
    assert stored(served) == [
        (
            "letta-Sam-memory",
            "observation",
            "human (Letta core memory of Sam): Name: Chad. Feels happy after long walks by "
            "the river.",
            "2025-03-02T12:00:00.000Z",
        ),
        (
            "letta-Sam-memory",
            "observation",
            "persona (Letta core memory of Sam): I am Sam, a calm and curious companion.",
            "2025-03-02T12:00:00.000Z",
        ),
        ("letta-Sam", "user", "My doctor says I should sleep more.", "2025-03-01T10:00:05.000Z"),
        (
            "letta-Sam",
            "assistant",
            "Your physician is right: rest matters.",
            "2025-03-01T10:00:07.000Z",
        ),
        (
            "letta-Sam",
            "assistant",
            "Shall we plan an earlier bedtime together?",
            "2025-03-01T10:00:12.000Z",
        ),
        (
            "letta-agent-7c2e4f-memory",
            "observation",
            "system/human (Letta core memory of agent-7c2e4f): Name: Chad. Has a kitten called "
            "Pixel. Works night shifts.",
            report["import_date"],
        ),
        (
            "letta-agent-7c2e4f-memory",
            "observation",
            "system/persona (Letta core memory of agent-7c2e4f): I am a patient study buddy who "
            "keeps answers short.",
            report["import_date"],
        ),
    ]
    assert any(m.startswith("human (Letta core memory of Sam)") for m in by_meaning(served, "glad"))
    again = moved_in(served, "letta", FIXTURES / "letta")
    assert again["stored"] == 0 and again["duplicates"] == 7


def test_a_malformed_agent_file_is_refused_naming_its_line(served: Served, tmp_path: Path) -> None:
    folder = tmp_path / "letta"
    shutil.copytree(FIXTURES / "letta", folder)
    text = (folder / "sam.af").read_text().replace('"blocks": [', '"blocks": [,', 1)
    (folder / "sam.af").write_text(text)
    line = text[: text.index('"blocks": [,')].count("\n") + 1
    assert_refused_whole(served, "letta", folder, f"sam.af, line {line}", "not JSON")


# --- out: markdown ------------------------------------------------------------------------


def front_matter(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    value: dict[str, Any] = yaml.safe_load(text.split("---\n")[1])
    return value


def test_export_to_markdown_writes_a_note_per_session_and_per_reflection(
    served: Served, tmp_path: Path
) -> None:
    moved_in(served, "server-memory", GRAPH)
    with served.http() as http:
        sources = _ids(http)
        made = http.post(
            "/v1/memory/import-reflections",
            json={
                "tier": 2,
                "entries": [{"text": "John works in AI and lives in Lisbon.", "importance": 7}],
                "source_ids": sources[:6],
            },
        )
        assert made.status_code == 200, made.text
    out = tmp_path / "notes"
    result = run(served, "export", "--to", "markdown", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "exported 4 notes" in result.stderr
    notes = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.md"))
    assert notes[:3] == [
        "reflections/tier-2/" + notes[0].split("/")[-1],
        "sessions/server-memory-Anthropic.md",
        "sessions/server-memory-John_Smith.md",
    ]
    john = front_matter(out / "sessions/server-memory-John_Smith.md")
    assert john["session_id"] == "server-memory-John_Smith" and john["memories"] == 6
    reflection = out / notes[0]
    assert front_matter(reflection)["tier"] == 2 and front_matter(reflection)["importance"] == 7
    assert "- built_from [[server-memory-John_Smith]]" in reflection.read_text()
    again = run(served, "export", "--to", "markdown", "-o", str(out))
    assert again.exit_code == 1 and "already exists" in again.output
    assert moved_in(served, "basic-memory", out)["records"] == 4  # notes basic-memory reads


def test_export_to_server_memory_makes_sessions_and_reflections_entities(
    served: Served, tmp_path: Path
) -> None:
    with served.http() as http:
        messages = [
            {"role": "user", "content": "We picked Postgres.", "session_id": "s-1"},
            {"role": "assistant", "content": "Noted.", "session_id": "s-1"},
            {"role": "user", "content": "A note without a session."},
        ]
        assert http.post("/v1/memory/ingest", json={"messages": messages}).status_code == 202
        made = http.post(
            "/v1/memory/import-reflections",
            json={
                "tier": 2,
                "entries": [{"text": "The team chose Postgres.", "importance": 6}],
                "source_ids": _ids(http)[:2],
            },
        )
        assert made.status_code == 200, made.text
    result = run(served, "export", "--to", "server-memory")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.split("\n")]
    assert lines == [
        {
            "type": "entity",
            "name": "s-1",
            "entityType": "session",
            "observations": ["We picked Postgres.", "Noted."],
        },
        {
            "type": "entity",
            "name": "memories without a session",
            "entityType": "session",
            "observations": ["A note without a session."],
        },
        {
            "type": "entity",
            "name": "reflections of tier 2",
            "entityType": "reflection",
            "observations": ["The team chose Postgres."],
        },
    ]


def _ids(http: Any) -> list[str]:
    lines = http.get("/v1/memory/export").text.splitlines()
    return [json.loads(line)["id"] for line in lines]


def test_import_refuses_a_folder_for_a_file_format(served: Served) -> None:
    result = run(served, "import", "--from", "chatgpt", str(FIXTURES / "basic-memory"))
    assert result.exit_code == 1 and "is a folder" in result.output


def test_openmemory_zip_without_its_files_is_refused(served: Served, tmp_path: Path) -> None:
    empty = tmp_path / "export.zip"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("readme.txt", "nothing")
    empty.write_bytes(buffer.getvalue())
    assert_refused_whole(served, "mem0", empty, "export.zip", "memories.json")


def test_the_command_offers_every_product_the_readers_know() -> None:
    assert commands.PRODUCTS == moving.PRODUCTS
