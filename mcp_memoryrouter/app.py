"""Composition root of the whole server: today the vault; MCP and OAuth mount beside it."""

from __future__ import annotations

from fastapi import FastAPI

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.app import create_vault_app


def create_app(settings: Settings) -> FastAPI:
    return create_vault_app(settings)
