-- Which key stored each memory: the key's public id (never the key) and the mode it was
-- presented in ('full'; 'write' for a key narrowed by its :write suffix). Prepare leaves out
-- of its block what a write-only key, or a key revoked since, stored (docs/proxy.md, "Whose
-- memories are injected"); search still finds it. NULL: stored before writers were kept.
ALTER TABLE memories ADD COLUMN key_id TEXT;
ALTER TABLE memories ADD COLUMN key_mode TEXT;
