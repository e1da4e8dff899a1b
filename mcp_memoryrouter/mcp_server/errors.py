"""Tool errors: a vault rejection or failure becomes an ``isError`` result whose text starts
a failure, its class), so a model can act on it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from mcp_memoryrouter.errors import MemoryRouterError

log = logging.getLogger(__name__)


@asynccontextmanager
async def backend_errors() -> AsyncIterator[None]:
    """Turn a vault rejection or failure into an ``isError`` result whose text names the
    problem (and, for a failure, its class). Arguments were checked already, against the
    tool's schema (the wire models' own field types)."""
    try:
        yield
    except ToolError:
        raise
    except MemoryRouterError as exc:
        raise ToolError(f"{exc.code}: {exc.message}") from exc
    except ValidationError as exc:  # the vault's answer, not the arguments
        raise ToolError(
            f"transport_failure: the vault answered with a body that is not a valid "
            f"{exc.title} (ValidationError); is it the same MemoryRouter version?"
        ) from exc
    except Exception as exc:
        log.exception("tool call failed")
        raise ToolError(
            f"internal_error: the call failed with {type(exc).__name__}; try again, and if it "
            "persists the server log has the details"
        ) from exc
