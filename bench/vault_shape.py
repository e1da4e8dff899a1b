"""What distributing the vaults rests on: a vault's rows and bytes per table, and the
statements each REST call sends to the database.

    python bench/vault_shape.py [--memories 10000] [--database-url postgresql://…]

One vault, in-process (the service and the store a server runs; HTTP through an in-memory
client), on SQLite or with ``--database-url`` on a fresh PostgreSQL database: ``memories``
raw memories over a year, consolidated as bench/forgetting.py does (tier 1 into tier 2 in
2,000-token batches of 3 reflections, tier 2 into tier 3), every memory embedded in 384
dimensions (the width of the default local model; hashed vectors, since only their size
matters here). Printed:

- per table: its rows, and its bytes with its indexes (SQLite's ``dbstat``; PostgreSQL's
  ``pg_relation_size`` and ``pg_indexes_size``), each also per raw memory;
- per REST operation (and the embedding worker, the operator's key commands): the data
  statements one call sends (an ``executemany`` counts once; transaction control not at all),
  and how many are not pinned to the vault (tests/store/vault_scope.py), by their nature or
  not yet (the two lists of tests/store/test_vault_filter.py), from that test's workload run
  over this vault and recorded at the same seam. On SQLite, a write also reads the change
  log its in-process BM25 index follows (``temp.lexical_log``): counted, never pinned, and
  absent from PostgreSQL.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, table
from bench.forgetting import build
from bench.vault import postgres_database
from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from tests.store.recorder import Executed, Recording, recording_postgres, recording_sqlite
from tests.store.test_vault_filter import NOT_VAULT_SCOPED
from tests.store.vault_scope import DATA, kind, problems, shape
from tests.store.workload import OPERATOR, Embedder, Workload, exercise
from tests.support import Vault, make_vault

# The tables of a vault's data, then the rest a store keeps (the lexical index: SQLite's FTS5
# tables, PostgreSQL's postings).
TABLES = [
    "vaults",
    "keys",
    "memories",
    "lineage",
    "batches",
    "batch_sources",
    "vectors",
    "embed_queue",
    "usage_events",
]


FTS = "memories_fts (FTS5 index)"


class Hashed384(Embedder):
    """The test's hashed vectors at the local model's width."""

    model_id = "shape-hashed-384"
    dim = 384


Switch = Callable[[], AbstractContextManager[object]]


@contextmanager
def opened(tmp: Path, database_url: str | None) -> Iterator[tuple[Vault, Recording, Switch]]:
    """The vault in-process, the recording of its statements, and what turns the recording
    on for the workload (SQLite's is on throughout: it wraps the connections the store opens;
    the statements of the build are dropped before the workload)."""
    recording = Recording()
    embedders = Embedders({"hashed": Hashed384}, "hashed")
    if database_url is None:
        # on for the store's life: every connection it opens (one per thread) is recorded
        with recording_sqlite(recording):
            vault = make_vault(tmp, embedders=embedders)
            try:
                yield vault, recording, nullcontext
            finally:
                vault.http.close()
                vault.store.close()
        return
    from mcp_memoryrouter.vault.store.postgres import PostgresStore

    with postgres_database(database_url, 0) as url:
        store = PostgresStore(url, pool_min=1, pool_max=4)
        vault = make_vault(tmp, store=lambda _: store, embedders=embedders)
        yield vault, recording, lambda: recording_postgres(recording, url)
        vault.http.close()
        store.close()


def sizes(vault: Vault) -> dict[str, tuple[int, int]]:
    """Each table's (rows, bytes with its indexes); SQLite's FTS5 tables as one."""
    found: dict[str, tuple[int, int]] = {}
    for name in TABLES:
        found[name] = (int(vault.sql(f"SELECT count(*) FROM {name}")[0][0]), 0)
    if isinstance(vault.store, SQLiteStore):
        owner = dict(vault.sql("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'"))
        for btree, size in vault.sql("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(btree, btree)
            if table.startswith("memories_fts"):
                table = FTS
            if table in found or table == FTS:
                rows, total = found.get(table, (-1, 0))  # the index has no rows of its own
                found[table] = (rows, total + int(size))
        return found
    found["postings"] = (int(vault.sql("SELECT count(*) FROM postings")[0][0]), 0)
    for name in found:
        (size,) = vault.sql(f"SELECT pg_relation_size('{name}') + pg_indexes_size('{name}')")[0]
        found[name] = (found[name][0], int(size))
    return found


def statements(calls: list[Any]) -> list[list[str]]:
    """Per operation: its calls, and per call the data statements sent, those not pinned to
    the vault by their nature (the test's NOT_VAULT_SCOPED), and those not pinned yet."""
    by_nature = {shape(listed.sql) for listed in NOT_VAULT_SCOPED}
    by_route: dict[str, list[tuple[int, int, int]]] = {}
    for call in calls:
        name = call.route if call.method == OPERATOR else f"{call.method} {call.route}"
        sent = [e for e in call.executed if kind(e.sql) in DATA]
        loose = [shape(e.sql) for e in sent if unpinned(e)]
        nature = sum(s in by_nature for s in loose)
        by_route.setdefault(name, []).append((len(sent), nature, len(loose) - nature))
    return [
        [name, str(len(counts)), *(spread([c[i] for c in counts]) for i in range(3))]
        for name, counts in by_route.items()
    ]


def unpinned(executed: Executed) -> bool:
    return any(problems(executed.sql, row) for row in executed.rows[:1])


def spread(values: list[int]) -> str:
    low, high = min(values), max(values)
    return str(low) if low == high else f"{low}-{high}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    backend = "PostgreSQL" if args.database_url else "SQLite"
    with tempfile.TemporaryDirectory() as tmp, opened(Path(tmp), args.database_url) as found:
        vault, recording, recorded = found
        started = time.perf_counter()
        access = vault.service.authenticate(vault.key)
        build(vault.service, access, args.memories)
        embedded = vault.worker.drain()
        vault.post("/v1/memory/search", {"query": "deploy review"})  # PostgreSQL: its HNSW index
        stats = vault.service.stats(access)
        print(
            f"{backend}, one vault: {args.memories} raw memories, {stats.totals[2].count} tier 2, "
            f"{stats.totals[3].count} tier 3, {embedded} embedded (384-d), built in "
            f"{time.perf_counter() - started:.0f} s; code {code_version()}\n",
        )
        shape = sizes(vault)
        rows = [
            [
                name,
                f"{n:,}" if n >= 0 else "",
                f"{n / args.memories:.3f}" if n >= 0 else "",
                f"{size / 1024:,.0f}",
                f"{size / args.memories:,.0f}",
            ]
            for name, (n, size) in shape.items()
        ]
        total = sum(size for _, size in shape.values())
        rows.append(["all", "", "", f"{total / 1024:,.0f}", f"{total / args.memories:,.0f}"])
        headers = ["table", "rows", "rows / raw memory", "KiB (+ indexes)", "bytes / raw memory"]
        print(table(headers, rows) + "\n")
        recording.executed.clear()
        with recorded():
            workload = Workload(vault, recording)
            exercise(workload)
        headers = ["call", "calls", "statements / call", "not pinned: by nature", "not yet"]
        print(table(headers, statements(workload.calls)))


if __name__ == "__main__":
    main()
