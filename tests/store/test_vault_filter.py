"""The vault is the unit of distribution: every statement the store runs is pinned to one
vault, or is listed here with the reason it is not.

A workload runs every use case through the REST API (and the embedding worker, and the
operator's key commands) on SQLite and on PostgreSQL, recording every statement the store
executes (tests/store/recorder.py). Each distinct statement is then read
(tests/store/vault_scope.py): every table of vault data it mentions must be pinned to a vault
by its conditions, and every mention to the same vault. A statement that is not must be on
one of two lists, by its shape:

- :data:`NOT_VAULT_SCOPED`: statements that by their nature reach no one vault (the key
  lookup that finds the vault, the embedding worker's queue, ...), each with its reason;
  docs/deploy.md says how each is run when the vaults live on many databases.
- :data:`NOT_YET_PINNED`: statements of one vault's use case that reach its rows without
  naming it, each with the reason and what pins it (the steps of docs/deploy.md).

A statement on neither list fails the test, and so does an entry no statement matches (the
list keeps only what is true). A listed statement still may not mix two vaults.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from mcp_memoryrouter.vault.search.embeddings import Embedders
from mcp_memoryrouter.vault.store.postgres import PostgresStore
from mcp_memoryrouter.vault.store.postgres import lexical as pg_lexical
from mcp_memoryrouter.vault.store.sql import MEMORY_COLUMNS, writer_sql
from mcp_memoryrouter.vault.store.sqlite import SQLiteStore
from mcp_memoryrouter.vault.store.sqlite import lexical as sqlite_lexical
from tests import pg
from tests.store import vault_scope
from tests.store.recorder import Executed, Recording, recording_postgres, recording_sqlite
from tests.store.vault_scope import NOT_DATA, VAULT_COLUMN, kind, problems, shape
from tests.store.workload import Call, Embedder, Workload, exercise, routes
from tests.support import Vault, make_vault, sqlite_store

SQLITE, POSTGRES = "sqlite", "postgresql"
BOTH = (SQLITE, POSTGRES)
NOT_PINNED = ": not pinned to a vault"


@dataclass(frozen=True)
class Listed:
    """A statement as the store writes it (compared by :func:`vault_scope.shape`), why it
    is not pinned to a vault, and the databases whose store runs it."""

    sql: str
    why: str
    backends: tuple[str, ...] = BOTH


# --- statements that reach no one vault, by their nature ---------------------------------

# What the SQLite store's in-memory indexes keep of a row (its writer among it).
_INDEX_ROW = "seq, vault_id, tier, importance, date_from, date_to, session_id, " + writer_sql()
_INDEX_ROW_M = (
    "m.seq, m.vault_id, m.tier, m.importance, m.date_from, m.date_to, m.session_id, "
    + writer_sql("m.")
)
_QUEUED = (
    f"SELECT {_INDEX_ROW_M}, m.content, p.content FROM embed_queue q JOIN memories m "
    "ON m.seq = q.seq "
    "LEFT JOIN memories p ON p.seq = m.seq - 1 AND p.vault_id = m.vault_id AND p.tier = 1 "
    "AND m.tier = 1 AND p.session_id IS m.session_id AND abs(p.date_from - m.date_from) <= ? "
)
_CLAIMED = (
    "WITH claimed AS (UPDATE embed_queue SET claimed_until = clock_timestamp() + "
    "interval '2 minutes' WHERE (model, seq) IN (SELECT model, seq FROM embed_queue "
    "WHERE model = ? AND (claimed_until IS NULL OR claimed_until < clock_timestamp()) {among}"
    "ORDER BY seq LIMIT ? FOR UPDATE SKIP LOCKED) RETURNING seq) "
    "SELECT m.seq, m.vault_id, m.tier, m.importance, m.date_from, m.date_to, m.session_id, "
    "m.content, p.content FROM claimed q JOIN memories m ON m.seq = q.seq "
    "LEFT JOIN memories p ON p.seq = m.seq - 1 AND p.vault_id = m.vault_id AND p.tier = 1 "
    "AND m.tier = 1 AND p.session_id IS NOT DISTINCT FROM m.session_id "
    "AND abs(p.date_from - m.date_from) <= ? ORDER BY m.seq"
)
WORKER = (
    "the embedding worker's queue: one batch holds the queued rows of every vault, oldest "
    "first (under sharding: a worker per database, or per shard)"
)
REPLACED = (
    "a replaced model's vectors re-queued for its successor, model-wide, once per start "
    "(under sharding: run on every database; a multi-shard statement under Citus)"
)
SQLITE_INDEX = (
    "SQLite only: the in-process search index covers every vault of the file (a SQLite vault "
    "is never distributed)"
)

NOT_VAULT_SCOPED = (
    Listed(
        "SELECT k.vault_id, v.ref, k.name, k.read_only, k.created_ms, k.id, k.prefix, "
        "k.last_used_ms FROM keys k JOIN vaults v ON v.id = k.vault_id WHERE k.hash = ?",
        "the key lookup by its hash: it finds the vault every later statement is pinned to "
        "(the route of a request)",
    ),
    Listed(
        "SELECT count(*) FROM vaults",
        "serve's first run: whether any vault exists yet, to mint the first key",
    ),
    Listed(
        "SELECT id, ref FROM vaults ORDER BY created_ms, ref",
        "the operator's `keys list` and `keys create --vault`: every vault (by its reference)",
    ),
    Listed("SELECT DISTINCT model FROM embed_queue", WORKER),
    Listed(_QUEUED + "WHERE q.model = ? ORDER BY q.seq LIMIT ?", WORKER, (SQLITE,)),
    Listed(_CLAIMED.format(among=""), WORKER, (POSTGRES,)),
    Listed(
        "INSERT OR REPLACE INTO vectors (seq, model, vec) SELECT seq, ?, ? FROM memories "
        "WHERE seq = ?",
        WORKER,
        (SQLITE,),
    ),
    Listed(
        "SELECT seq FROM memories WHERE seq = ANY(?) ORDER BY seq FOR SHARE", WORKER, (POSTGRES,)
    ),
    Listed(
        "INSERT INTO vectors (seq, model, vec) VALUES (?, ?, ?::vector) "
        "ON CONFLICT (model, seq) DO UPDATE SET vec = excluded.vec",
        WORKER,
        (POSTGRES,),
    ),
    Listed("DELETE FROM embed_queue WHERE model = ? AND seq = ?", WORKER, (SQLITE,)),
    Listed("DELETE FROM embed_queue WHERE model = ? AND seq = ANY(?)", WORKER, (POSTGRES,)),
    Listed(
        "INSERT INTO embed_queue (seq, model) SELECT seq, ? FROM vectors WHERE model = ? "
        "ON CONFLICT DO NOTHING",
        REPLACED,
    ),
    Listed(
        "INSERT INTO embed_queue (seq, model) SELECT seq, ? FROM embed_queue WHERE model = ? "
        "ON CONFLICT DO NOTHING",
        REPLACED,
    ),
    Listed("DELETE FROM vectors WHERE model = ?", REPLACED),
    Listed("DELETE FROM embed_queue WHERE model = ?", REPLACED),
    Listed(
        f"SELECT {_INDEX_ROW_M}, v.vec FROM vectors v JOIN memories m ON m.seq = v.seq "
        "WHERE v.model = ?",
        SQLITE_INDEX + ": a model's vectors, loaded at its first search",
        (SQLITE,),
    ),
    Listed(
        f"SELECT {_INDEX_ROW} FROM memories ORDER BY seq",
        SQLITE_INDEX + ": the BM25 index, loaded at the first search",
        (SQLITE,),
    ),
    Listed(
        f"SELECT {_INDEX_ROW}, content, dated FROM memories WHERE seq IN (?)",
        SQLITE_INDEX + ": the BM25 index follows the rows a commit wrote (by its change log)",
        (SQLITE,),
    ),
)

# --- statements of one vault's use case that do not name it yet ----------------------------

BY_ID = (
    "rows found by id (or seq) after a statement pinned to the vault found them, in the same "
    "transaction: beside an id list, a vault filter makes the planners walk one of the "
    "vault's indexes instead (every index of memories but those on id, seq and lease_batch "
    "starts with vault_id). Pinned once memories is keyed (vault_id, id) and (vault_id, seq) "
    "(docs/deploy.md, steps 1 and 2)"
)
LINEAGE = (
    "lineage found by the parent or child id of the vault's memories: lineage_vault "
    "(vault_id alone) drew the planners off the id indexes (commit ef9956f). Pinned once "
    "lineage is keyed (vault_id, parent_id, child_id) with (vault_id, child_id) "
    "(docs/deploy.md, steps 1 and 2)"
)
NO_COLUMN = "{table} has no vault_id column yet (docs/deploy.md, step 1)"
LINEAGE_OF = f"SELECT {MEMORY_COLUMNS}{{extra}} FROM lineage l JOIN memories m ON m.id = l.{{end}} "

NOT_YET_PINNED = (
    # deleting (memories.plan_delete, delete_ids)
    Listed("SELECT DISTINCT parent_id FROM lineage l WHERE child_id IN (?)", LINEAGE),
    Listed(
        "SELECT DISTINCT parent_id FROM lineage l WHERE child_id IN (?) AND (EXISTS "
        "(SELECT ? FROM evidence e WHERE e.reflection_id = l.parent_id AND e.memory_id = "
        "l.child_id) OR NOT EXISTS (SELECT ? FROM evidence e WHERE e.reflection_id = "
        "l.parent_id))",
        LINEAGE + "; a derived delete that follows evidence reads each lineage row's evidence "
        "by the same ids (evidence is keyed (reflection_id, memory_id))",
    ),
    Listed("SELECT DISTINCT child_id FROM lineage WHERE parent_id IN (?)", LINEAGE),
    Listed("SELECT child_id, parent_id FROM lineage WHERE child_id IN (?)", LINEAGE),
    Listed(
        "SELECT seq, id, tier, tokens, importance, consolidated FROM memories "
        "WHERE id IN (?) ORDER BY id",
        BY_ID,
    ),
    Listed(
        "SELECT seq, id, tier, tokens, importance FROM memories "
        "WHERE id IN (?) AND consolidated = 1 ORDER BY id",
        BY_ID,
    ),
    Listed("SELECT id FROM memories WHERE id IN (?)", BY_ID),
    Listed(
        "UPDATE memories SET sources_deleted = sources_deleted + c.n FROM "
        "(SELECT parent_id, count(*) AS n FROM lineage WHERE child_id IN (?) "
        "GROUP BY parent_id) AS c WHERE memories.id = c.parent_id",
        BY_ID + "; and " + LINEAGE,
    ),
    Listed("DELETE FROM memories WHERE seq IN (?)", BY_ID),
    Listed("DELETE FROM lineage WHERE parent_id IN (?)", LINEAGE),
    Listed("UPDATE memories SET consolidated = 0 WHERE seq IN (?)", BY_ID),
    # consolidating (reflect.checkout, commit, create_reflections, enqueue)
    Listed(
        "INSERT INTO batch_sources (batch_id, memory_id, line) VALUES (?, ?, ?)",
        NO_COLUMN.format(table="batch_sources") + "; the batch row is the vault's",
    ),
    Listed("UPDATE memories SET lease_batch = ?, lease_until = ? WHERE id IN (?)", BY_ID),
    Listed(
        "SELECT m.id, m.tokens, m.importance FROM batch_sources b "
        "JOIN memories m ON m.id = b.memory_id "
        "WHERE b.batch_id = ? AND m.lease_batch = ? ORDER BY m.id FOR UPDATE OF m",
        NO_COLUMN.format(table="batch_sources")
        + "; the batch was read pinned to the vault just before; "
        + BY_ID,
    ),
    Listed(
        "UPDATE memories SET consolidated = 1, lease_batch = NULL, lease_until = NULL "
        "WHERE id IN (?)",
        BY_ID,
    ),
    Listed(
        "INSERT INTO embed_queue (seq, model) SELECT seq, ? FROM memories WHERE id IN (?) "
        "ON CONFLICT DO NOTHING",
        NO_COLUMN.format(table="embed_queue") + "; the rows were just written; " + BY_ID,
    ),
    Listed(
        _QUEUED + "WHERE q.model = ? AND m.id IN (?) ORDER BY q.seq LIMIT ?",
        "a search embedding its vault's latest small writes first (read your writes), "
        "through the worker's queue (Store.take_embed_rows is given ids, not their vault); "
        + BY_ID,
        (SQLITE,),
    ),
    Listed(
        _CLAIMED.format(among="AND seq IN (SELECT seq FROM memories WHERE id = ANY(?)) "),
        "a search embedding its vault's latest small writes first (read your writes), "
        "through the worker's queue (Store.take_embed_rows is given ids, not their vault); "
        + BY_ID,
        (POSTGRES,),
    ),
    # restoring (backup.link_deleted_sources, export_page)
    Listed(
        "UPDATE memories SET sources_total = sources_total + ?, "
        "sources_deleted = sources_deleted + ? WHERE id IN (?)",
        BY_ID,
    ),
    Listed(
        "SELECT l.parent_id, l.child_id, m.id FROM lineage l "
        "LEFT JOIN memories m ON m.id = l.child_id AND m.vault_id = ? "
        "WHERE l.parent_id IN (?) ORDER BY l.parent_id, m.date_from, l.child_id",
        LINEAGE + "; the parents are the page just read, pinned",
    ),
    # reading (reflect.support, sources_by_date, built_from, similar_sources)
    Listed("SELECT id, sources_total, sources_deleted FROM memories WHERE id IN (?)", BY_ID),
    Listed(
        LINEAGE_OF.format(extra="", end="child_id")
        + "LEFT JOIN evidence e ON e.vault_id = m.vault_id AND e.reflection_id = l.parent_id "
        "AND e.memory_id = m.id WHERE l.parent_id = ? AND m.vault_id = ? "
        "ORDER BY CASE WHEN e.rank IS NULL THEN ? ELSE ? END, e.rank, m.date_from, m.id "
        "LIMIT ? OFFSET ?",
        LINEAGE + "; the memories are pinned, and the evidence with them",
    ),
    Listed(
        LINEAGE_OF.format(extra="", end="parent_id")
        + "WHERE l.child_id = ? AND m.vault_id = ? ORDER BY m.date_from, m.id LIMIT ?",
        LINEAGE + "; the memories are pinned",
    ),
    Listed(
        LINEAGE_OF.format(extra=", v.vec", end="child_id")
        + "LEFT JOIN vectors v ON v.seq = m.seq AND v.model = ? "
        "WHERE l.parent_id = ? AND m.vault_id = ?",
        LINEAGE + "; the memories are pinned",
        (SQLITE,),
    ),
    Listed(
        LINEAGE_OF.format(
            extra=", CASE WHEN vector_dims(v.vec) = vector_dims(own.vec) "
            "THEN 1 - (v.vec <=> own.vec) END AS score",
            end="child_id",
        )
        + "LEFT JOIN vectors v ON v.seq = m.seq AND v.model = ? "
        "LEFT JOIN (SELECT pv.vec FROM vectors pv JOIN memories p ON p.seq = pv.seq "
        "WHERE p.id = ? AND p.vault_id = ? AND pv.model = ?) own ON true "
        "WHERE l.parent_id = ? AND m.vault_id = ? "
        "ORDER BY score DESC NULLS LAST, m.date_from, m.id LIMIT ? OFFSET ?",
        LINEAGE + "; the memories are pinned",
        (POSTGRES,),
    ),
)


# --- the verdict -------------------------------------------------------------------------


def _scripts(backend: str) -> list[str]:
    """The texts of several statements a store may run at once: its migrations, and the
    SQLite writer's change log (a temporary table and triggers of its own connection)."""
    folder = resources.files("mcp_memoryrouter.vault.migrations").joinpath(
        "postgres" if backend == POSTGRES else "sqlite"
    )
    migrations = [
        p.read_text(encoding="utf-8") for p in folder.iterdir() if p.name.endswith(".sql")
    ]
    return [*migrations, sqlite_lexical.CHANGE_LOG]


def _script(executed: Executed) -> bool:
    return executed.script or executed.sql.strip().rstrip(";").count(";") > 0


def verdict(executed: Sequence[Executed], backend: str) -> list[str]:
    """What breaks the rule among ``executed`` (empty: nothing), one line each."""
    failures: list[str] = []
    seen: dict[str, set[str]] = {}  # shape -> problems found in any of its executions
    for run in executed:
        if _script(run):
            if not any(known.strip() in run.sql for known in _scripts(backend)):
                failures.append(f"a script that is no migration: {run.sql[:200]!r}")
        elif kind(run.sql) in NOT_DATA:
            continue
        elif kind(run.sql) not in vault_scope.DATA:
            failures.append(f"a statement of an unknown kind: {run.sql[:200]!r}")
        else:
            found = seen.setdefault(shape(run.sql), set())
            for row in run.rows:
                found.update(problems(run.sql, row))
            found.update(_unknown_tables(run.sql))
    listed = _listed(backend)
    for statement, found in sorted(seen.items()):
        if statement in listed:  # only not being pinned is excused, never mixing vaults
            unpinned = {p for p in found if p.endswith(NOT_PINNED)}
            if not unpinned:
                failures.append(f"listed, but pinned to its vault now: {statement}")
            found = found - unpinned
        for problem in sorted(found):
            failures.append(f"{problem}\n    in: {statement}")
    for statement in sorted(listed - seen.keys()):
        failures.append(f"listed, but the store never ran it on {backend}: {statement}")
    return failures


def _listed(backend: str) -> set[str]:
    """The shapes both lists excuse on ``backend``."""
    entries = (*NOT_VAULT_SCOPED, *NOT_YET_PINNED)
    return {shape(e.sql) for e in entries if backend in e.backends}


def _unknown_tables(sql: str) -> list[str]:
    known = vault_scope.VAULT_DATA | set(vault_scope.NOT_VAULT_DATA)
    try:
        mentioned = {m.table for m in vault_scope.read(sql).mentions}
    except (ValueError, KeyError, IndexError):
        return []  # problems() says the reader cannot read it
    return [f"{table}: a table the catalogue does not know" for table in mentioned - known]


# --- one run of the workload per database ------------------------------------------------


@dataclass(frozen=True)
class Run:
    backend: str
    executed: list[Executed]
    calls: list[Call]
    columns: dict[str, set[str]]  # each table of the schema, and its columns


def _columns_sqlite(vault: Vault) -> dict[str, set[str]]:
    names = [r[0] for r in vault.sql("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {n: {r[1] for r in vault.sql(f"PRAGMA table_info('{n}')")} for n in names}


def _columns_postgres(vault: Vault) -> dict[str, set[str]]:
    rows = vault.sql(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'public'"
    )
    found: dict[str, set[str]] = {}
    for table, column in rows:
        found.setdefault(table, set()).add(column)
    return found


@pytest.fixture(scope="module", params=pg.BACKENDS if pg.available() else [SQLITE])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """The workload, once, on the parameter's database, every statement recorded."""
    backend: str = request.param
    tmp = tmp_path_factory.mktemp(backend)
    recording = Recording()
    embedders = Embedders({"concepts": Embedder}, "concepts")
    if backend == SQLITE:
        with recording_sqlite(recording):
            vault = make_vault(tmp, store=sqlite_store, embedders=embedders)
            workload = Workload(vault, recording)
            exercise(workload)
        columns = _columns_sqlite(vault)
        vault.http.close()
        vault.store.close()
        yield Run(backend, recording.executed, workload.calls, columns)
        return
    databases: pg.Databases = request.getfixturevalue("postgres_databases")
    url = databases.create()
    store = None
    try:
        with pytest.MonkeyPatch.context() as patch:
            # The vault's common words are sampled from 1,000 memories on: from 10 here, so
            # the sample's statement runs too. Vector search takes the HNSW path from 8 rows.
            patch.setattr(pg_lexical, "PRUNE_FROM_ROWS", 10)
            with recording_postgres(recording, url):
                store = PostgresStore(url, pool_min=0, pool_max=4, exact_max=8)
                vault = make_vault(tmp, store=lambda _: store, embedders=embedders)
                workload = Workload(vault, recording)
                exercise(workload)
        columns = _columns_postgres(vault)
        vault.http.close()
    finally:
        if store is not None:
            store.close()
        databases.release(url)
    yield Run(backend, recording.executed, workload.calls, columns)


# --- the tests ---------------------------------------------------------------------------


def test_every_statement_is_pinned_to_one_vault_or_listed(run: Run) -> None:
    failures = verdict(run.executed, run.backend)
    assert not failures, f"{len(failures)} on {run.backend}:\n" + "\n".join(failures)


def test_the_workload_calls_every_route_and_reaches_the_store(run: Run) -> None:
    called = {(c.method, c.route) for c in run.calls}
    assert routes() <= called, f"routes the workload never calls: {sorted(routes() - called)}"
    silent = {c.name for c in run.calls if not c.executed} - {"GET /healthz"}
    assert not silent, f"calls that ran no statement: {sorted(silent)}"


def test_the_catalogue_knows_every_table_and_its_vault_column(run: Run) -> None:
    catalogued = vault_scope.VAULT_DATA | set(vault_scope.NOT_VAULT_DATA)
    assert set(run.columns) <= catalogued, f"tables to classify: {set(run.columns) - catalogued}"
    for table, column in VAULT_COLUMN.items():
        if run.backend == "sqlite" and table in vault_scope.POSTGRES_ONLY:
            assert table not in run.columns
            continue
        assert column in run.columns[table], f"{table} has no {column}"
    for table, links in vault_scope.BELONGS_TO.items():
        # when one gains its vault_id, it moves to VAULT_COLUMN (and its statements pin it)
        assert "vault_id" not in run.columns[table], f"{table} has a vault_id now"
        for column, parent, key in links:
            assert column in run.columns[table] and key in run.columns[parent]


# --- the checker, on statements written to break the rule ---------------------------------

V1, V2 = "vault-1", "vault-2"
BROKEN = [
    ("SELECT id FROM memories WHERE id = ?", ["m"], "memories: not pinned"),
    ("SELECT id FROM memories WHERE vault_id = ? OR id = ?", [V1, "m"], "memories: not pinned"),
    ("SELECT id FROM memories WHERE vault_id IN (?, ?)", [V1, V2], "memories: not pinned"),
    ("SELECT id FROM memories WHERE vault_id <> ?", [V1], "memories: not pinned"),
    (
        "SELECT l.child_id FROM lineage l LEFT JOIN memories m "
        "ON m.id = l.child_id AND m.vault_id = ? AND l.vault_id = m.vault_id",
        [V1],
        "lineage l: not pinned",
    ),
    (
        "SELECT m.id FROM memories m JOIN lineage l ON l.child_id = m.id "
        "WHERE m.vault_id = ? AND l.vault_id = ?",
        [V1, V2],
        "pinned to 2 different vaults",
    ),
    (
        "SELECT m.id FROM memories m, memories n WHERE m.vault_id = ? AND n.id = m.id",
        [V1],
        "memories n: not pinned",
    ),
    (
        "SELECT id FROM memories WHERE vault_id = ? AND id IN "
        "(SELECT child_id FROM lineage WHERE parent_id = ?)",
        [V1, "p"],
        "lineage: not pinned",
    ),
    ("INSERT INTO usage_events (at_ms, endpoint) VALUES (?, ?)", [1, "x"], "not pinned"),
    (
        "INSERT INTO lineage (parent_id, child_id, vault_id) VALUES (?, ?, ?), (?, ?, ?)",
        ["a", "b", V1, "c", "d", V2],
        "pinned to 2 different vaults",
    ),
    ("UPDATE memories SET vault_id = ? WHERE vault_id = ?", [V2, V1], "between vaults"),
    ("DELETE FROM vectors WHERE seq = ?", [7], "vectors: not pinned"),
    (
        "SELECT v.vec FROM vectors v LEFT JOIN memories m ON m.seq = v.seq AND m.vault_id = ?",
        [V1],
        "vectors v: not pinned",
    ),
    ("SELECT id FROM memories m RIGHT JOIN lineage l ON true", [], "cannot read"),
    ("SELECT id FROM memories; DELETE FROM memories", [], "several statements"),
    (
        "WITH input AS (SELECT * FROM unnest(?::bigint[]) AS t(seq)) "
        "INSERT INTO embed_queue (seq, model) SELECT seq, ? FROM input",
        [[1, 2], "model"],
        "embed_queue: not pinned",
    ),
]
KEPT = [
    ("SELECT id FROM memories WHERE vault_id = ? AND id IN (?, ?)", [V1, "a", "b"]),
    ("SELECT id FROM memories WHERE +vault_id = ? AND seq IN (?)", [V1, 3]),
    ("SELECT id FROM memories WHERE (vault_id = ? AND tier = ?)", [V1, 1]),
    ("SELECT m.id FROM memories m WHERE m.vault_id = ? AND (m.tier = ? OR m.tier = ?)", [V1, 1, 2]),
    (
        "SELECT m.id FROM memories m JOIN lineage l ON l.vault_id = m.vault_id "
        "AND l.child_id = m.id WHERE m.vault_id = ?",
        [V1],
    ),
    ("SELECT count(*) FROM vectors v JOIN memories m ON m.seq = v.seq WHERE m.vault_id = ?", [V1]),
    (
        "DELETE FROM batch_sources WHERE batch_id IN (SELECT id FROM batches WHERE vault_id = ?)",
        [V1],
    ),
    (
        "INSERT INTO embed_queue (seq, model) SELECT seq, ? FROM memories "
        "WHERE vault_id = ? AND id IN (?)",
        ["model", V1, "a"],
    ),
    ("INSERT INTO lineage (parent_id, child_id, vault_id) VALUES (?, ?, ?)", ["a", "b", V1]),
    ("UPDATE vaults SET n1 = n1 + ? WHERE id = ?", [1, V1]),
    ("SELECT u FROM (SELECT tsv FROM memories WHERE vault_id = ?) AS s, unnest(s.tsv) AS u", [V1]),
    ("SELECT version FROM schema_migrations", []),
    (
        "WITH ins AS (INSERT INTO memories (id, vault_id) SELECT id, ? FROM unnest(?::text[]) "
        "WITH ORDINALITY AS t(id, ord) RETURNING seq) "
        "INSERT INTO embed_queue (seq, model) SELECT seq, ? FROM ins",
        [V1, ["a"], "model"],
    ),
]


@pytest.mark.parametrize(("sql", "params", "expected"), BROKEN)
def test_the_checker_finds_a_statement_that_breaks_the_rule(
    sql: str, params: list[Any], expected: str
) -> None:
    found = problems(sql, params)
    assert any(expected in p for p in found), found


@pytest.mark.parametrize(("sql", "params"), KEPT)
def test_the_checker_passes_a_statement_that_keeps_it(sql: str, params: list[Any]) -> None:
    assert problems(sql, params) == []


def test_the_verdict_fails_an_unlisted_statement_and_a_stale_entry() -> None:
    new = Executed("SELECT content FROM memories WHERE id = ?", (["m"],), "a new call")
    failures = verdict([new], SQLITE)
    assert f"memories: not pinned to a vault\n    in: {shape(new.sql)}" in failures
    # ... and every entry of the lists, since none of them ran
    assert sum("never ran it" in f for f in failures) == len(_listed(SQLITE))


def test_a_listed_statement_still_may_not_mix_vaults() -> None:
    mixed = Executed(
        "SELECT DISTINCT parent_id FROM lineage WHERE child_id IN (?) AND vault_id = ? "
        "AND vault_id = ?",
        ([["a"], V1, V2],),
        "a call",
    )
    assert any(f.startswith("pinned to 2 different vaults") for f in verdict([mixed], SQLITE))


def test_shapes_are_one_for_both_databases() -> None:
    sqlite = 'SELECT id FROM memories WHERE id IN (?,?,?) ORDER BY id COLLATE "C"'
    postgres = "SELECT id FROM memories WHERE id = ANY(?) ORDER BY id FOR UPDATE OF m"
    assert shape(sqlite) == shape(postgres) == "SELECT id FROM memories WHERE id IN (?) ORDER BY id"


def test_the_recording_is_the_stores_own(tmp_path: Path) -> None:
    """Outside a recording the store's connections are plain sqlite3 connections."""
    recording = Recording()
    for name in ("recorded", "plain"):
        (tmp_path / name).mkdir()
    with recording_sqlite(recording):
        recorded = SQLiteStore(tmp_path / "recorded" / "vault.sqlite3")
    plain = SQLiteStore(tmp_path / "plain" / "vault.sqlite3")
    try:
        assert type(recorded._writer).__name__ == "_RecordingConnection"
        assert type(plain._writer).__name__ == "Connection"
        assert recording.executed and all(e.call == "opening the store" for e in recording.executed)
    finally:
        recorded.close()
        plain.close()
