-- Facts that stay current, and reflections that show their own evidence (docs/consolidation.md).
-- A reflection a later one replaced: when it stopped being current and what replaced it
-- (NULL: current). Its kind: 'preference' for a lasting preference or instruction (NULL:
-- an ordinary memory). (IF NOT EXISTS: a vault rolled back to an earlier recorded version,
-- as the upgrade tests make one, runs it again.)
ALTER TABLE memories ADD COLUMN IF NOT EXISTS superseded_ms bigint;
ALTER TABLE memories ADD COLUMN IF NOT EXISTS superseded_by text COLLATE "C";
ALTER TABLE memories ADD COLUMN IF NOT EXISTS kind text;
CREATE INDEX IF NOT EXISTS memories_superseded ON memories (vault_id, superseded_ms)
    WHERE superseded_ms IS NOT NULL;
CREATE INDEX IF NOT EXISTS memories_kind ON memories (vault_id, kind) WHERE kind IS NOT NULL;
-- The contract version a batch was checked out with (1: the first, NULL before it was kept),
-- and each source's line in the checkout's text (1-based; what an entry's "cites" names).
ALTER TABLE batches ADD COLUMN IF NOT EXISTS contract integer;
ALTER TABLE batch_sources ADD COLUMN IF NOT EXISTS line integer;
-- The existing reflections a version-2 checkout showed the model, by the label it showed.
CREATE TABLE IF NOT EXISTS batch_related (
    batch_id   text COLLATE "C" NOT NULL,
    vault_id   text COLLATE "C" NOT NULL,
    label      text NOT NULL,
    memory_id  text COLLATE "C" NOT NULL,
    PRIMARY KEY (batch_id, label)
);
-- Each reflection's own evidence: the sources of its batch that support it, best first, with
-- the score of entry and source (and whether the entry cited it). The batch lineage stays.
CREATE TABLE IF NOT EXISTS evidence (
    reflection_id  text COLLATE "C" NOT NULL,
    memory_id      text COLLATE "C" NOT NULL,
    vault_id       text COLLATE "C" NOT NULL,
    rank           integer NOT NULL,
    score          real NOT NULL,
    cited          integer NOT NULL DEFAULT 0,
    PRIMARY KEY (reflection_id, memory_id)
);
CREATE INDEX IF NOT EXISTS evidence_memory ON evidence (memory_id);
