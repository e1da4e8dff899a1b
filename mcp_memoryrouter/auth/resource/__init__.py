"""The resource-server side of /mcp: who is calling (memory keys, access tokens of the
embedded or an external authorization server) and the HTTP answer when they may not."""
