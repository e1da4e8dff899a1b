"""Moving in: the time to import 10,000 records of each product, in one command.

    python bench/moving_in.py [--records 10000] [--embeddings none|local]

One real ``mcp-memoryrouter serve`` process; for each product, input of ``--records``
memories written in its own format (as ``tests/reflect/fixtures/moving/`` are), a fresh vault,
and ``mcp-memoryrouter import --from PRODUCT`` run as its own process, timed from start to
exit (reading and checking the whole input, the vault's export read for undated records,
the requests, the summary), then run again (everything a duplicate):

- server-memory: a ``memory.jsonl`` of entities of 8 observations and one relation each
  (entity, observations and relation: 10 memories an entity);
- mem0: ``get_all`` JSON of memories of 10 users, dated;
- basic-memory: a folder of notes of 8 observations, a relation and a paragraph;
- letta: an agent file of one agent, 4 core memory blocks and its conversation.

With ``--embeddings local`` the server embeds what it stores in the background meanwhile,
on the same cores (the import is not waiting for it: a request of 500 messages is queued).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, new_vault, server, table

TOPICS = ["the release plan", "a customer call", "the database choice", "an invoice", "a trip"]


def server_memory(folder: Path, records: int) -> Path:
    path = folder / "memory.jsonl"
    entities = records // 10
    lines = [
        json.dumps(
            {
                "type": "entity",
                "name": f"Person_{n}",
                "entityType": "person",
                "observations": [f"Talked about {TOPICS[(n + j) % 5]} ({j})" for j in range(8)],
            }
        )
        for n in range(entities)
    ]
    lines += [
        json.dumps(
            {
                "type": "relation",
                "from": f"Person_{n}",
                "to": f"Person_{(n + 1) % entities}",
                "relationType": "knows",
            }
        )
        for n in range(entities)
    ]
    path.write_text("\n".join(lines))
    return path


def mem0(folder: Path, records: int) -> Path:
    path = folder / "get_all.json"
    results = [
        {
            "id": f"m-{n}",
            "memory": f"Mentioned {TOPICS[n % 5]} on day {n}",
            "hash": f"{n:032x}",
            "metadata": None,
            "created_at": f"2025-{1 + n % 12:02d}-{1 + n % 28:02d}T10:{n % 60:02d}:00-08:00",
            "updated_at": None,
            "user_id": f"user-{n % 10}",
        }
        for n in range(records)
    ]
    path.write_text(json.dumps({"results": results}))
    return path


def basic_memory(folder: Path, records: int) -> Path:
    notes = folder / "notes"
    notes.mkdir()
    for n in range(records // 10):
        observations = "\n".join(
            f"- [topic] {TOPICS[(n + j) % 5]} came up ({j}) #work" for j in range(8)
        )
        (notes / f"note-{n}.md").write_text(
            f"---\ntitle: Note {n}\ntype: note\npermalink: note-{n}\n---\n\n# Note {n}\n\n"
            f"A paragraph about {TOPICS[n % 5]}.\n\n## Observations\n{observations}\n\n"
            f"## Relations\n- relates_to [[Note {(n + 1) % (records // 10)}]]\n"
        )
    return notes


def letta(folder: Path, records: int) -> Path:
    path = folder / "agent.af"
    blocks = [
        {
            "id": f"block-{i}",
            "label": label,
            "value": f"What the agent keeps as {label}.",
            "limit": 5000,
        }
        for i, label in enumerate(["human", "persona", "project", "preferences"])
    ]
    messages = [
        {
            "id": f"message-{n}",
            "role": "user" if n % 2 == 0 else "assistant",
            "content": [{"type": "text", "text": f"Message {n} about {TOPICS[n % 5]}."}],
            "created_at": f"2025-03-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z",
        }
        for n in range(records - len(blocks))
    ]
    agent = {
        "id": "agent-0",
        "name": "Sam",
        "block_ids": [b["id"] for b in blocks],
        "messages": messages,
    }
    value = {
        "agents": [agent],
        "groups": [],
        "blocks": blocks,
        "files": [],
        "sources": [],
        "tools": [],
        "mcp_servers": [],
        "metadata": {},
        "created_at": "2025-03-02T12:00:00Z",
    }
    path.write_text(json.dumps(value))
    return path


PRODUCTS = {
    "server-memory": server_memory,
    "mem0": mem0,
    "basic-memory": basic_memory,
    "letta": letta,
}


def imported(url: str, key: str, product: str, path: Path) -> tuple[float, dict[str, object]]:
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcp_memoryrouter",
            "import",
            "--from",
            product,
            str(path),
            "--json",
            "--api-url",
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "MEMORYROUTER_KEY": key},
    )
    report: dict[str, object] = json.loads(done.stdout)
    return time.perf_counter() - started, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--embeddings", choices=["none", "local"], default="none")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        inputs = {}
        for product, write in PRODUCTS.items():
            (Path(tmp) / product).mkdir()
            inputs[product] = write(Path(tmp) / product, args.records)
        with server(data, {"MEMORYROUTER_EMBEDDINGS": args.embeddings}) as url:
            for product, path in inputs.items():
                key = new_vault(data, f"bench-{product}")
                first, report = imported(url, key, product, path)
                again, second = imported(url, key, product, path)
                rows.append(
                    [
                        product,
                        str(report["memories"]),
                        str(report["stored"]),
                        f"{first:.1f}",
                        f"{report['stored'] / first:,.0f}",  # type: ignore[operator]
                        f"{again:.1f}",
                        str(second["duplicates"]),
                    ]
                )
    print(f"code {code_version()}, embeddings {args.embeddings}, {args.records} records a product")
    print(
        table(
            ["--from", "memories", "stored", "import s", "memories/s", "again s", "duplicates"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
