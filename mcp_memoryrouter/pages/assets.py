"""The one stylesheet both kinds of page wear, ``ui/static/explorer.css``: the explorer serves
it under ``/ui/static/``, the authorization server at :data:`STYLESHEET_PATH` (so its pages
keep their look when the explorer is off)."""

from __future__ import annotations

from importlib import resources

STYLESHEET_PATH = "/oauth/static/explorer.css"


def stylesheet() -> bytes:
    """The explorer's stylesheet, as the package ships it."""
    shipped = resources.files("mcp_memoryrouter").joinpath("ui", "static", "explorer.css")
    return shipped.read_bytes()
