-- Where each memory came from, beside the key that stored it (0006): the key's name when it
-- stored, the surface the write came through (rest, mcp, proxy, explorer, import,
-- consolidator, reflector) and the client that surface names (an MCP or OAuth client's name).
-- NULL: stored before they were kept.
ALTER TABLE memories ADD COLUMN key_name TEXT;
ALTER TABLE memories ADD COLUMN surface TEXT;
ALTER TABLE memories ADD COLUMN client TEXT;
