-- Date search: raw rows by date, reflections by either end of their coverage window.
CREATE INDEX memories_tier_from ON memories (vault_id, tier, date_from, id);
CREATE INDEX memories_tier_to ON memories (vault_id, tier, date_to, id);
