-- The vault schema on PostgreSQL: the same concepts as the SQLite schema (one database, many
-- vaults, every row keyed by vault), with a generated tsvector for lexical search and pgvector
-- for dense search. Ids compare bytewise (COLLATE "C") so every ORDER BY ... id matches the
-- order the service merges and pages in.

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE vaults (
    id              text COLLATE "C" PRIMARY KEY,
    ref             text NOT NULL UNIQUE,
    created_ms      bigint NOT NULL,
    -- unconsolidated debt, updated in the same transaction as every write
    raw_units       bigint NOT NULL DEFAULT 0,
    raw_tokens      bigint NOT NULL DEFAULT 0,
    t2_count        bigint NOT NULL DEFAULT 0,
    t2_importance   bigint NOT NULL DEFAULT 0,
    t2_tokens       bigint NOT NULL DEFAULT 0,
    -- totals per tier
    n1 bigint NOT NULL DEFAULT 0, tok1 bigint NOT NULL DEFAULT 0,
    n2 bigint NOT NULL DEFAULT 0, tok2 bigint NOT NULL DEFAULT 0, imp2 bigint NOT NULL DEFAULT 0,
    n3 bigint NOT NULL DEFAULT 0, tok3 bigint NOT NULL DEFAULT 0, imp3 bigint NOT NULL DEFAULT 0
);

CREATE TABLE keys (
    hash        text PRIMARY KEY,
    vault_id    text COLLATE "C" NOT NULL REFERENCES vaults(id),
    name        text NOT NULL,
    read_only   smallint NOT NULL,
    created_ms  bigint NOT NULL
);

CREATE TABLE memories (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id            text COLLATE "C" NOT NULL UNIQUE,
    vault_id      text COLLATE "C" NOT NULL,
    tier          smallint NOT NULL CHECK (tier IN (1, 2, 3)),
    role          text,
    content       text NOT NULL,
    tokens        integer NOT NULL,
    importance    integer,
    date_from     bigint NOT NULL,
    date_to       bigint NOT NULL,
    session_id    text,
    dedup         text,
    batch_id      text COLLATE "C",
    created_ms    bigint NOT NULL,
    consolidated  smallint NOT NULL DEFAULT 0,
    lease_batch   text COLLATE "C",
    lease_until   bigint,
    dated         text NOT NULL DEFAULT '',
    tsv           tsvector GENERATED ALWAYS AS (to_tsvector('english', content || ' ' || dated)) STORED
);
CREATE UNIQUE INDEX memories_dedup ON memories (vault_id, dedup) WHERE dedup IS NOT NULL;
CREATE INDEX memories_pool ON memories (vault_id, tier, date_from, id) WHERE consolidated = 0;
CREATE INDEX memories_date ON memories (vault_id, date_from);
CREATE INDEX memories_tier_from ON memories (vault_id, tier, date_from, id);
CREATE INDEX memories_tier_to ON memories (vault_id, tier, date_to, id);
CREATE INDEX memories_lease ON memories (lease_batch) WHERE lease_batch IS NOT NULL;
CREATE INDEX memories_tsv ON memories USING gin (tsv);

CREATE TABLE batches (
    id                    text COLLATE "C" PRIMARY KEY,
    vault_id              text COLLATE "C" NOT NULL,
    tier                  smallint NOT NULL,
    created_ms            bigint NOT NULL,
    lease_until           bigint NOT NULL,
    covers_from           bigint NOT NULL,
    covers_to             bigint NOT NULL,
    est_tokens            bigint NOT NULL,
    session_id            text,
    committed_ms          bigint,
    created_json          text,
    sources_consolidated  integer
);
CREATE INDEX batches_vault ON batches (vault_id);

CREATE TABLE batch_sources (
    batch_id   text COLLATE "C" NOT NULL,
    memory_id  text COLLATE "C" NOT NULL,
    PRIMARY KEY (batch_id, memory_id)
);

-- parent = the reflection, child = one of its sources. Rows stay when the child is
-- deleted (inspect counts it in sources_deleted) and go when the parent is deleted.
CREATE TABLE lineage (
    parent_id  text COLLATE "C" NOT NULL,
    child_id   text COLLATE "C" NOT NULL,
    vault_id   text COLLATE "C" NOT NULL,
    PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX lineage_child ON lineage (child_id);
CREATE INDEX lineage_vault ON lineage (vault_id);

CREATE TABLE usage_events (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    vault_id    text COLLATE "C" NOT NULL,
    at_ms       bigint NOT NULL,
    endpoint    text NOT NULL,
    kind        text NOT NULL,
    tokens      bigint NOT NULL,
    session_id  text
);
CREATE INDEX usage_vault ON usage_events (vault_id, at_ms);

-- Vectors of every model in one table, without a fixed dimension; each model gets its own
-- partial HNSW index over (vec::vector(dim)) when it is first searched. A deleted memory
-- leaves every layer in its own transaction: the cascades remove its vector and queue row.
CREATE TABLE vectors (
    seq    bigint NOT NULL REFERENCES memories(seq) ON DELETE CASCADE,
    model  text NOT NULL,
    vec    vector NOT NULL,
    PRIMARY KEY (model, seq)
);
CREATE INDEX vectors_seq ON vectors (seq);

-- The persisted embedding queue. A worker claims rows for a while (claimed_until) so workers
-- on several replicas share the queue instead of embedding the same rows.
CREATE TABLE embed_queue (
    seq            bigint NOT NULL REFERENCES memories(seq) ON DELETE CASCADE,
    model          text NOT NULL,
    claimed_until  timestamptz,
    PRIMARY KEY (model, seq)
);
CREATE INDEX embed_queue_seq ON embed_queue (seq);
