-- Keys a person can manage: a public id (never the secret) to list and revoke a key by, a
-- short non-secret prefix to recognise it, and when it was last used (at most once a minute).
ALTER TABLE keys ADD COLUMN id TEXT;
ALTER TABLE keys ADD COLUMN prefix TEXT;
ALTER TABLE keys ADD COLUMN last_used_ms INTEGER;
UPDATE keys SET id = 'key_' || lower(hex(randomblob(8))) WHERE id IS NULL;
CREATE UNIQUE INDEX keys_id ON keys (id);
CREATE INDEX keys_vault ON keys (vault_id);
