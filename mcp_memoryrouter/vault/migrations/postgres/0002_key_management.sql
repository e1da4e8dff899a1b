-- Keys a person can manage: a public id (never the secret) to list and revoke a key by, a
-- short non-secret prefix to recognise it, and when it was last used (at most once a minute).
ALTER TABLE keys ADD COLUMN id text COLLATE "C";
ALTER TABLE keys ADD COLUMN prefix text;
ALTER TABLE keys ADD COLUMN last_used_ms bigint;
UPDATE keys SET id = 'key_' || substr(md5(random()::text || clock_timestamp()::text || hash), 1, 16)
WHERE id IS NULL;
ALTER TABLE keys ALTER COLUMN id SET NOT NULL;
CREATE UNIQUE INDEX keys_id ON keys (id);
CREATE INDEX keys_vault ON keys (vault_id);
