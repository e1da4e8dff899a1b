-- The server's reflector (docs/reflector.md), one row per vault it has met: whether it may
-- consolidate the vault (enabled = 0: the owner consolidates with their own model), which
-- run holds the vault now and until when (one run per vault at a time, across replicas), when
-- the next triggered run may start (the cooldown, or the backoff after failures), and what
-- the last run did, for stats. (IF NOT EXISTS: a vault rolled back to an earlier recorded
-- version, as the upgrade tests make one, runs it again.)
CREATE TABLE IF NOT EXISTS reflector_runs (
    vault_id          text COLLATE "C" PRIMARY KEY REFERENCES vaults(id),
    enabled           smallint NOT NULL DEFAULT 1,
    holder            text,
    held_until_ms     bigint NOT NULL DEFAULT 0,
    next_after_ms     bigint NOT NULL DEFAULT 0,
    failures          integer NOT NULL DEFAULT 0,
    last_run_ms       bigint,
    last_outcome      text,
    last_error        text,
    last_batches      integer NOT NULL DEFAULT 0,
    last_reflections  integer NOT NULL DEFAULT 0
);
