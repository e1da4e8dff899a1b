"""mcp-memoryrouter: a three-tier memory vault for AI assistants."""

__version__ = "0.1.0"
