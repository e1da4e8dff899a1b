-- The vault schema: one database, many vaults, every row keyed by vault.

CREATE TABLE vaults (
    id              TEXT PRIMARY KEY,
    ref             TEXT NOT NULL UNIQUE,
    created_ms      INTEGER NOT NULL,
    -- unconsolidated debt, updated in the same transaction as every write
    raw_units       INTEGER NOT NULL DEFAULT 0,
    raw_tokens      INTEGER NOT NULL DEFAULT 0,
    t2_count        INTEGER NOT NULL DEFAULT 0,
    t2_importance   INTEGER NOT NULL DEFAULT 0,
    t2_tokens       INTEGER NOT NULL DEFAULT 0,
    -- totals per tier
    n1 INTEGER NOT NULL DEFAULT 0, tok1 INTEGER NOT NULL DEFAULT 0,
    n2 INTEGER NOT NULL DEFAULT 0, tok2 INTEGER NOT NULL DEFAULT 0, imp2 INTEGER NOT NULL DEFAULT 0,
    n3 INTEGER NOT NULL DEFAULT 0, tok3 INTEGER NOT NULL DEFAULT 0, imp3 INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE keys (
    hash        TEXT PRIMARY KEY,
    vault_id    TEXT NOT NULL REFERENCES vaults(id),
    name        TEXT NOT NULL,
    read_only   INTEGER NOT NULL,
    created_ms  INTEGER NOT NULL
);

CREATE TABLE memories (
    seq           INTEGER PRIMARY KEY,
    id            TEXT NOT NULL UNIQUE,
    vault_id      TEXT NOT NULL,
    tier          INTEGER NOT NULL CHECK (tier IN (1, 2, 3)),
    role          TEXT,
    content       TEXT NOT NULL,
    tokens        INTEGER NOT NULL,
    importance    INTEGER,
    date_from     INTEGER NOT NULL,
    date_to       INTEGER NOT NULL,
    session_id    TEXT,
    dedup         TEXT,
    batch_id      TEXT,
    created_ms    INTEGER NOT NULL,
    consolidated  INTEGER NOT NULL DEFAULT 0,
    lease_batch   TEXT,
    lease_until   INTEGER
);
CREATE UNIQUE INDEX memories_dedup ON memories (vault_id, dedup) WHERE dedup IS NOT NULL;
CREATE INDEX memories_pool ON memories (vault_id, tier, date_from, id) WHERE consolidated = 0;
CREATE INDEX memories_date ON memories (vault_id, date_from);

CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content, content = 'memories', content_rowid = 'seq', tokenize = 'porter unicode61'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content) VALUES (new.seq, new.content);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.seq, old.content);
END;

CREATE TABLE batches (
    id                    TEXT PRIMARY KEY,
    vault_id              TEXT NOT NULL,
    tier                  INTEGER NOT NULL,
    created_ms            INTEGER NOT NULL,
    lease_until           INTEGER NOT NULL,
    covers_from           INTEGER NOT NULL,
    covers_to             INTEGER NOT NULL,
    est_tokens            INTEGER NOT NULL,
    session_id            TEXT,
    committed_ms          INTEGER,
    created_json          TEXT,
    sources_consolidated  INTEGER
);
CREATE INDEX batches_vault ON batches (vault_id);

CREATE TABLE batch_sources (
    batch_id   TEXT NOT NULL,
    memory_id  TEXT NOT NULL,
    PRIMARY KEY (batch_id, memory_id)
) WITHOUT ROWID;

-- parent = the reflection, child = one of its sources. Rows stay when the child is
-- deleted (inspect counts it in sources_deleted) and go when the parent is deleted.
CREATE TABLE lineage (
    parent_id  TEXT NOT NULL,
    child_id   TEXT NOT NULL,
    vault_id   TEXT NOT NULL,
    PRIMARY KEY (parent_id, child_id)
) WITHOUT ROWID;
CREATE INDEX lineage_child ON lineage (child_id);
CREATE INDEX lineage_vault ON lineage (vault_id);

CREATE TABLE usage_events (
    seq         INTEGER PRIMARY KEY,
    vault_id    TEXT NOT NULL,
    at_ms       INTEGER NOT NULL,
    endpoint    TEXT NOT NULL,
    kind        TEXT NOT NULL,
    tokens      INTEGER NOT NULL,
    session_id  TEXT
);
CREATE INDEX usage_vault ON usage_events (vault_id, at_ms);
