"""The vault app as a separate server process reads it: ``uvicorn --factory`` over
``MEMORYROUTER_*`` settings (the scale-out tests start several)."""

from __future__ import annotations

from fastapi import FastAPI

from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.app import create_vault_app


def app() -> FastAPI:
    return create_vault_app(Settings())
