-- Facts that stay current, and reflections that show their own evidence (docs/consolidation.md).
-- A reflection a later one replaced: when it stopped being current and what replaced it
-- (NULL: current). Its kind: 'preference' for a lasting preference or instruction (NULL:
-- an ordinary memory).
ALTER TABLE memories ADD COLUMN superseded_ms INTEGER;
ALTER TABLE memories ADD COLUMN superseded_by TEXT;
ALTER TABLE memories ADD COLUMN kind TEXT;
CREATE INDEX memories_superseded ON memories (vault_id, superseded_ms)
    WHERE superseded_ms IS NOT NULL;
CREATE INDEX memories_kind ON memories (vault_id, kind) WHERE kind IS NOT NULL;
-- The contract version a batch was checked out with (1: the first, NULL before it was kept),
-- and each source's line in the checkout's text (1-based; what an entry's "cites" names).
ALTER TABLE batches ADD COLUMN contract INTEGER;
ALTER TABLE batch_sources ADD COLUMN line INTEGER;
-- The existing reflections a version-2 checkout showed the model, by the label it showed.
CREATE TABLE batch_related (
    batch_id   TEXT NOT NULL,
    vault_id   TEXT NOT NULL,
    label      TEXT NOT NULL,
    memory_id  TEXT NOT NULL,
    PRIMARY KEY (batch_id, label)
) WITHOUT ROWID;
-- Each reflection's own evidence: the sources of its batch that support it, best first, with
-- the score of entry and source (and whether the entry cited it). The batch lineage stays.
CREATE TABLE evidence (
    reflection_id  TEXT NOT NULL,
    memory_id      TEXT NOT NULL,
    vault_id       TEXT NOT NULL,
    rank           INTEGER NOT NULL,
    score          REAL NOT NULL,
    cited          INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (reflection_id, memory_id)
) WITHOUT ROWID;
CREATE INDEX evidence_memory ON evidence (memory_id);
