"""Authentication and authorization of the MCP endpoint: scopes, tokens, the authorization
server. Never imports the vault: it reaches it through ``client.VaultClient``."""
