"""The page every answer a person reads in a browser stands in: the explorer's pages and the
sign-in and consent pages of the authorization server alike.

One skeleton (:func:`document`) and one stylesheet, ``ui/static/explorer.css``: the explorer
serves it under ``/ui/static/``, the authorization server at :data:`STYLESHEET_PATH` (so its
pages keep their look when the explorer is off). Neither kind of page carries an inline
script or style: their Content-Security-Policy allows the stylesheet from this server only.
The skeleton lives here, below the explorer, because the explorer stands on ``auth`` and not
the other way round.
"""

from __future__ import annotations

from html import escape
from importlib import resources

PRODUCT = "MemoryRouter"
STYLESHEET_PATH = "/oauth/static/explorer.css"


def stylesheet() -> bytes:
    """The explorer's stylesheet, as the package ships it."""
    shipped = resources.files("mcp_memoryrouter").joinpath("ui", "static", "explorer.css")
    return shipped.read_bytes()


def document(
    title: str,
    content: str,
    *,
    site: str,
    stylesheet_url: str,
    script_url: str | None = None,
    header: str = "",
    footer: str = "",
    main_class: str | None = None,
) -> str:
    """A whole page: ``title`` (text) as the page's heading and, followed by ``site``, the
    tab's; ``content`` (HTML) below the heading; ``header`` and ``footer`` (HTML) around it."""
    script = f'<script src="{escape(script_url)}" defer></script>' if script_url else ""
    main = f' class="{escape(main_class)}"' if main_class else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} · {escape(site)}</title>"
        f'<link rel="stylesheet" href="{escape(stylesheet_url)}">{script}</head><body>'
        '<a class="skip" href="#main">Skip to content</a>'
        f'{header}<main id="main"{main}><h1>{escape(title)}</h1>{content}</main>'
        f"{footer}</body></html>"
    )
