"""What forgetting costs: support counts on reflection rows, and a derived delete.

    python bench/forgetting.py [--size 20000] [--samples 200] [--database-url postgresql://…]

One vault, in-process (the service and the store a server runs, without HTTP), on SQLite or
with ``--database-url`` on a fresh PostgreSQL database: ``size`` raw memories consolidated into
tier-2 reflections (3 per ~2,000-token batch) and those into tier 3. Printed per call, CPU of
this process and wall, median of ``samples`` calls:

- a search over reflections (tiers 2 and 3, lexical) and prepare over them, with each
  reflection's support counted (``sources_total``/``sources_deleted``) beside the same calls
  with the counting switched off, alternated call by call;
- deleting one raw memory by default, as a dry run of a derived delete, and as a derived
  delete (each on a different consolidated raw memory).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import code_version, table
from bench.vault import ingest_notes, postgres_database
from mcp_memoryrouter.vault.rules.access import Access
from mcp_memoryrouter.vault.rules.domain import (
    Batch,
    DeleteOutcome,
    Entry,
    Memory,
    SearchFilter,
)
from mcp_memoryrouter.vault.rules.prepare import ContextSize
from mcp_memoryrouter.vault.service import VaultService
from mcp_memoryrouter.vault.store import Store
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore

REFLECTIONS = SearchFilter(tiers=(2, 3))
QUERIES = ["deploy auth", "postgres budget", "review design", "memory vector", "invoice bug"]


@contextmanager
def opened(tmp: Path, database_url: str | None) -> Iterator[Store]:
    if database_url is None:
        store: Store = SQLiteStore(tmp / "vault.sqlite3")
        yield store
        store.close()
        return
    from mcp_memoryrouter.vault.store.postgres import PostgresStore

    with postgres_database(database_url, 0) as url:
        store = PostgresStore(url, pool_min=1, pool_max=2)
        yield store
        store.close()


def build(service: VaultService, access: Access, size: int) -> None:
    ingest_notes(service, access, size)
    for tier, budget in ((1, 2_000), (2, None)):
        while True:
            found = service.checkout(access, tier, budget, None)  # type: ignore[arg-type]
            if not isinstance(found, Batch):
                break
            first = found.sources[0].content.split()
            words = " ".join(first[3:9])
            entries = [Entry(f"Part {n} of what happened: {words}.", 4 + n) for n in range(3)]
            service.commit(access, found.batch_id, entries, None)


def delete(
    service: VaultService,
    access: Access,
    target: str,
    flags: dict[str, bool],
    into: list[tuple[DeleteOutcome, object]],
) -> None:
    into.append(service.delete_ids(access, [target], **flags))


def cpu_and_wall(fn: Callable[[], object]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, opened(Path(tmp), args.database_url) as store:
        service = VaultService(store, clock=lambda: time.time_ns() // 1_000_000, lease_seconds=900)
        key, _ = service.create_vault()
        access = service.authenticate(key)
        started = time.perf_counter()
        build(service, access, args.size)
        stats = service.stats(access)
        print(
            f"vault: {args.size} raw, {stats.totals[2].count} tier 2, {stats.totals[3].count} "
            f"tier 3, built in {time.perf_counter() - started:.0f} s; "
            f"{'PostgreSQL' if args.database_url else 'SQLite'}; code {code_version()}",
            file=sys.stderr,
        )
        counted = store.with_support

        def uncounted(vault_id: str, rows: Sequence[Memory]) -> tuple[Memory, ...]:
            return tuple(rows)

        calls: dict[str, Callable[[int], object]] = {
            "search tiers 2,3": lambda i: service.search(
                access, QUERIES[i % len(QUERIES)], 10, REFLECTIONS
            ),
            "prepare tiers 2,3": lambda i: service.prepare(
                access, QUERIES[i % len(QUERIES)], ContextSize(10, 3_000), REFLECTIONS
            ),
        }
        rows: list[list[str]] = []
        for name, call in calls.items():
            with_counts: list[tuple[float, float]] = []
            without: list[tuple[float, float]] = []
            for i in range(args.samples):
                store.with_support = counted  # type: ignore[method-assign]
                with_counts.append(cpu_and_wall(partial(call, i)))
                store.with_support = uncounted  # type: ignore[method-assign]
                without.append(cpu_and_wall(partial(call, i)))
            store.with_support = counted  # type: ignore[method-assign]
            base = median([c for c, _ in without])
            counted_cpu = median([c for c, _ in with_counts])
            rows.append(
                [
                    name,
                    f"{base:.2f} / {median([w for _, w in without]):.2f}",
                    f"{counted_cpu:.2f} / {median([w for _, w in with_counts]):.2f}",
                    f"{counted_cpu / max(base, 1e-9):.2f}",
                ]
            )
        print(
            table(
                ["call", "no support counts: CPU / wall ms", "with: CPU / wall ms", "CPU ratio"],
                rows,
            )
        )

        consolidated = [
            r[0]
            for r in store._read(
                lambda tx: tx.all(
                    "SELECT id FROM memories WHERE tier = 1 AND consolidated = 1 ORDER BY id"
                )
            )
        ]
        picks = random.Random(7).sample(consolidated, 3 * min(args.samples, 100))
        kinds: dict[str, dict[str, bool]] = {
            "delete 1 raw (default)": {},
            "dry run, derived": {"derived": True, "dry_run": True},
            "delete 1 raw, derived": {"derived": True},
        }
        measured: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
        went: dict[str, list[int]] = {k: [] for k in kinds}
        for n in range(len(picks) // 3):
            for k, (name, flags) in enumerate(kinds.items()):
                target = picks[3 * n + k]
                outcome: list[tuple[DeleteOutcome, object]] = []
                measured[name].append(
                    cpu_and_wall(partial(delete, service, access, target, flags, outcome))
                )
                done = outcome[0][0]
                went[name].append(
                    sum(len(ids) for ids in done.by_tier.values()) + sum(done.returned.values())
                )
        print(
            table(
                ["delete", "CPU / wall ms", "rows gone + returned to the pool (median)"],
                [
                    [
                        name,
                        f"{median([c for c, _ in v]):.2f} / {median([w for _, w in v]):.2f}",
                        f"{median(went[name]):.0f}",
                    ]
                    for name, v in measured.items()
                ],
            )
        )


if __name__ == "__main__":
    main()
