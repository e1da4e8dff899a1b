"""The vault's token estimate: the package-wide one of :mod:`mcp_memoryrouter.tokens`."""

from __future__ import annotations

from mcp_memoryrouter.tokens import est_tokens

__all__ = ["est_tokens"]
