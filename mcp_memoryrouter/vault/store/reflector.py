"""The server's reflector's rows (``reflector_runs``): one per vault, each use case one
statement. A run is claimed by one statement that only succeeds while nobody holds the
vault (and, for a triggered run, once its cooldown or backoff is over), so two replicas
over one PostgreSQL database never run the same vault at once."""

from __future__ import annotations

from mcp_memoryrouter.db import Row, Tx
from mcp_memoryrouter.vault.rules.domain import ReflectorRuns, RunEnded

_COLUMNS = (
    "enabled, held_until_ms, next_after_ms, failures, last_run_ms, last_outcome, last_error, "
    "last_batches, last_reflections"
)


def _runs(row: Row | None) -> ReflectorRuns:
    if row is None:
        return ReflectorRuns()
    return ReflectorRuns(bool(row[0]), *row[1:])


def state(tx: Tx, vault_id: str) -> ReflectorRuns:
    return _runs(tx.one(f"SELECT {_COLUMNS} FROM reflector_runs WHERE vault_id = ?", (vault_id,)))


def claim(
    tx: Tx, vault_id: str, holder: str, now_ms: int, until_ms: int, *, triggered: bool
) -> ReflectorRuns | None:
    """Hold the vault for ``holder`` until ``until_ms``: only when the reflector may
    consolidate it, nobody holds it, and (a ``triggered`` run) its cooldown or backoff is
    over. The vault's row as the run starts, or None when it may not."""
    due = "AND reflector_runs.next_after_ms <= ?" if triggered else ""
    row = tx.one(
        "INSERT INTO reflector_runs (vault_id, holder, held_until_ms) VALUES (?, ?, ?) "
        "ON CONFLICT (vault_id) DO UPDATE SET holder = excluded.holder, "
        "held_until_ms = excluded.held_until_ms "
        f"WHERE reflector_runs.enabled = 1 AND reflector_runs.held_until_ms <= ? {due} "
        "RETURNING vault_id",
        (vault_id, holder, until_ms, now_ms, *((now_ms,) if triggered else ())),
    )
    return None if row is None else state(tx, vault_id)


def finish(tx: Tx, vault_id: str, holder: str, ended: RunEnded) -> None:
    """Release ``holder``'s hold and keep what its run did (a hold another run took since,
    after this one's ran out, is left alone)."""
    failures = "0" if ended.error is None else "failures + 1"
    tx.run(
        f"UPDATE reflector_runs SET held_until_ms = 0, holder = NULL, failures = {failures}, "
        "next_after_ms = ?, last_run_ms = ?, last_outcome = ?, last_error = ?, "
        "last_batches = ?, last_reflections = ? WHERE vault_id = ? AND holder = ?",
        (
            ended.next_after_ms,
            ended.at_ms,
            ended.outcome,
            ended.error,
            ended.batches,
            ended.reflections,
            vault_id,
            holder,
        ),
    )


def enable(tx: Tx, vault_id: str, enabled: bool) -> ReflectorRuns:
    tx.run(
        "INSERT INTO reflector_runs (vault_id, enabled) VALUES (?, ?) "
        "ON CONFLICT (vault_id) DO UPDATE SET enabled = excluded.enabled",
        (vault_id, int(enabled)),
    )
    return state(tx, vault_id)
