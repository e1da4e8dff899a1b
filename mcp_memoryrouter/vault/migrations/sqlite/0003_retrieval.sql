-- Hybrid retrieval: vectors per embedding model, a persisted embedding queue, and the event
-- date as searchable words beside the content.

CREATE TABLE vectors (
    seq    INTEGER NOT NULL,
    model  TEXT NOT NULL,
    vec    BLOB NOT NULL,
    PRIMARY KEY (model, seq)
) WITHOUT ROWID;
CREATE INDEX vectors_seq ON vectors (seq);

CREATE TABLE embed_queue (
    seq    INTEGER NOT NULL,
    model  TEXT NOT NULL,
    PRIMARY KEY (model, seq)
) WITHOUT ROWID;
CREATE INDEX embed_queue_seq ON embed_queue (seq);

-- A deleted memory leaves every layer: rows, lexical index, vectors, queue.
CREATE TRIGGER memories_vectors_delete AFTER DELETE ON memories BEGIN
    DELETE FROM vectors WHERE seq = old.seq;
    DELETE FROM embed_queue WHERE seq = old.seq;
END;

ALTER TABLE memories ADD COLUMN dated TEXT NOT NULL DEFAULT '';

DROP TRIGGER memories_fts_insert;
DROP TRIGGER memories_fts_delete;
DROP TABLE memories_fts;
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content, dated, content = 'memories', content_rowid = 'seq', tokenize = 'porter unicode61'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content, dated) VALUES (new.seq, new.content, new.dated);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, dated)
    VALUES ('delete', old.seq, old.content, old.dated);
END;
INSERT INTO memories_fts (memories_fts) VALUES ('rebuild');
CREATE VIRTUAL TABLE memories_vocab USING fts5vocab (memories_fts, 'row');
