-- Where each memory came from, beside the key that stored it (0006): the key's name when it
-- stored, the surface the write came through (rest, mcp, proxy, explorer, import,
-- consolidator, reflector) and the client that surface names (an MCP or OAuth client's name).
-- NULL: stored before they were kept. Adding nullable columns without a default reads and
-- rewrites no row. (IF NOT EXISTS: a vault rolled back to an earlier recorded version, as the
-- upgrade tests make one, runs it again.)
ALTER TABLE memories ADD COLUMN IF NOT EXISTS key_name text;
ALTER TABLE memories ADD COLUMN IF NOT EXISTS surface text;
ALTER TABLE memories ADD COLUMN IF NOT EXISTS client text;
