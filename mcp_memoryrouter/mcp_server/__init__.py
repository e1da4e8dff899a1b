"""The MCP server: memory tools that reach the vault only through ``client.VaultClient``."""
