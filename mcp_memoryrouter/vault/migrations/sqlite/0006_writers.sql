-- Which key stored each memory: the key's public id (never the key) and the mode it was
-- presented in ('full'; 'write' for a key narrowed by its :write suffix). Prepare leaves out
-- of its block what a write-only key, or a key revoked since, stored (docs/proxy.md, "Whose
-- memories are injected"); search still finds it. NULL: stored before writers were kept.
-- The partial index finds a vault's rows by writer: prepare asks whether any row of the
-- vault was written otherwise than by a current key in full mode (a few index probes).
ALTER TABLE memories ADD COLUMN key_id TEXT;
ALTER TABLE memories ADD COLUMN key_mode TEXT CHECK (key_mode IN ('full', 'write'));
CREATE INDEX memories_writer ON memories (vault_id, key_mode, key_id) WHERE key_id IS NOT NULL;
