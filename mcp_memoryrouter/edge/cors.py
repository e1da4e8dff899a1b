"""Cross-origin requests: the paths that answer any origin themselves (discovery and the
token endpoints, which browser-based clients call from their own origin), and the configured
policy for everything else."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send


def cross_origin(app: ASGIApp, origins: Sequence[str], public: tuple[str, ...]) -> ASGIApp:
    """``app`` behind the CORS policy of ``origins``, except paths under ``public``, which
    answer any origin themselves."""
    cors = CORSMiddleware(
        app,
        allow_origins=list(origins),
        allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
        allow_headers=["*"],
        expose_headers=["Mcp-Session-Id", "WWW-Authenticate"],
    )

    async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
        own = scope["type"] == "http" and scope["path"].startswith(public)
        await (app if own else cors)(scope, receive, send)

    return dispatch
