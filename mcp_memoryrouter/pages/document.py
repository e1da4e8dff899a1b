"""The page every answer a person reads in a browser stands in: the explorer's pages and the
sign-in and consent pages of the authorization server alike.

One skeleton (:func:`document`), and one rule for what goes into it: every value from outside
passes through :func:`esc` (or ``auth.display.shown`` for text another party wrote); the
renderers are pure functions from what a page says to its HTML. No page carries an inline
script or style: the Content-Security-Policy (:mod:`.headers`) forbids both.
"""

from __future__ import annotations

from html import escape

PRODUCT = "MemoryRouter"


def esc(value: object) -> str:
    """``value`` as HTML text, quotes escaped too (safe in an attribute)."""
    return escape(str(value), quote=True)


def alert(message: str) -> str:
    """A refusal or an error, read out at once by a screen reader."""
    return f'<p class="error" role="alert">{esc(message)}</p>'


def status(message: str) -> str:
    """What was done, read out by a screen reader when it is idle."""
    return f'<p class="notice" role="status">{esc(message)}</p>'


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
