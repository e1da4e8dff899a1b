-- Lexical search as BM25 over postings, the way the SQLite store ranks (search/lexical.py):
-- one row per (vault, lexeme, memory) with the lexeme's count in the memory (tf) and the
-- memory's length in lexemes (dl), so a search reads only the index entries of its words
-- (an index-only scan) instead of every matching memory's row, and ranks with each vault's
-- own statistics: its live memories (n1 + n2 + n3) and their length (vaults.lexemes).
--
-- The lexemes are those of the generated tsv column (the configuration below). Triggers
-- on memories keep the postings and the vault's length in step with every statement that
-- adds or removes memories, in the same transaction; a memory's text never changes.
-- The lexemes are PostgreSQL's English stems with no stop word dropped, as FTS5's porter
-- tokenizer keeps every word on SQLite: a word's weight is its IDF in the vault, and words
-- in over half of a vault's memories are left out of the query (search.ranking.prune_common).
-- Dropping stop words by a fixed list instead made "I cooked tagine at home" longer, in
-- lexemes, than "I cooked risotto" and shorter than it in what a person reads.
CREATE TEXT SEARCH DICTIONARY memoryrouter_stem (TEMPLATE = snowball, Language = english);
CREATE TEXT SEARCH CONFIGURATION memoryrouter (COPY = english);
ALTER TEXT SEARCH CONFIGURATION memoryrouter
    ALTER MAPPING REPLACE english_stem WITH memoryrouter_stem;

-- The column is made again under that configuration (its GIN index goes with it: search
-- reads the postings below).
ALTER TABLE memories DROP COLUMN tsv;
ALTER TABLE memories ADD COLUMN tsv tsvector
    GENERATED ALWAYS AS (to_tsvector('memoryrouter', content || ' ' || dated)) STORED;

CREATE TABLE postings (
    vault_id  text COLLATE "C" NOT NULL,
    lexeme    text COLLATE "C" NOT NULL,
    seq       bigint NOT NULL,
    tf        integer NOT NULL,
    dl        integer NOT NULL,
    PRIMARY KEY (vault_id, lexeme, seq) INCLUDE (tf, dl)
);

ALTER TABLE vaults ADD COLUMN lexemes bigint NOT NULL DEFAULT 0;

-- A lexeme's tf is its number of positions (a tsvector keeps at most 256 per lexeme); dl is
-- the sum over the memory's lexemes (stop words have none).
CREATE FUNCTION postings_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH docs AS (
        SELECT a.vault_id, a.seq, a.tsv,
               (SELECT coalesce(sum(coalesce(cardinality(u.positions), 1)), 0)
                FROM unnest(a.tsv) AS u)::integer AS dl
        FROM added a
    ), inserted AS (
        INSERT INTO postings (vault_id, lexeme, seq, tf, dl)
        SELECT d.vault_id, u.lexeme, d.seq, coalesce(cardinality(u.positions), 1), d.dl
        FROM docs d, unnest(d.tsv) AS u
    )
    UPDATE vaults v SET lexemes = v.lexemes + t.n
    FROM (SELECT vault_id, sum(dl) AS n FROM docs GROUP BY vault_id) t
    WHERE v.id = t.vault_id AND t.n > 0;
    RETURN NULL;
END $$;

CREATE FUNCTION postings_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (
        DELETE FROM postings p
        USING (SELECT r.vault_id, u.lexeme, r.seq FROM removed r, unnest(r.tsv) AS u) d
        WHERE p.vault_id = d.vault_id AND p.lexeme = d.lexeme AND p.seq = d.seq
        RETURNING p.vault_id, p.tf
    )
    UPDATE vaults v SET lexemes = v.lexemes - t.n
    FROM (SELECT vault_id, sum(tf) AS n FROM gone GROUP BY vault_id) t
    WHERE v.id = t.vault_id;
    RETURN NULL;
END $$;

CREATE TRIGGER memories_postings_added AFTER INSERT ON memories
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION postings_added();
CREATE TRIGGER memories_postings_removed AFTER DELETE ON memories
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION postings_removed();

-- The memories already stored.
INSERT INTO postings (vault_id, lexeme, seq, tf, dl)
SELECT m.vault_id, u.lexeme, m.seq, coalesce(cardinality(u.positions), 1), d.dl
FROM memories m
CROSS JOIN LATERAL (
    SELECT coalesce(sum(coalesce(cardinality(x.positions), 1)), 0)::integer AS dl
    FROM unnest(m.tsv) AS x
) d
CROSS JOIN LATERAL unnest(m.tsv) AS u;

UPDATE vaults v SET lexemes = t.n
FROM (SELECT vault_id, sum(tf) AS n FROM postings GROUP BY vault_id) t
WHERE v.id = t.vault_id;
