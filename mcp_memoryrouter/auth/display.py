"""How the sign-in and consent pages show text that comes from outside: a client's name
and id, the host it returns to, a reason another server gave. Whoever wrote it cannot make
the page say something else: no character of it can reorder or hide the page's own words,
and a user name before an ``@`` never passes for the host."""

from __future__ import annotations

from html import escape
from urllib.parse import urlsplit

from mcp_memoryrouter.schemas import hidden


def visible(text: str) -> str:
    """``text`` with every control, format or separator character (``schemas.hidden``: the
    bidi embeddings, overrides, isolates and marks U+202A-U+202E, U+2066-U+2069, U+200E,
    U+200F and U+061C among them; not the joiners) shown as ``<U+202E>``, so it can neither
    reorder the words around it nor hide any of its own."""
    return "".join(f"<U+{ord(c):04X}>" if hidden(c) else c for c in text)


def shown(text: str) -> str:
    """Text from outside (a client's name, its id, its return host), as HTML: its hidden
    characters made visible, escaped, and isolated in ``<bdi>`` so that even a name in a
    right-to-left script leaves the order of the page's own sentence as it is."""
    return f"<bdi>{escape(visible(text))}</bdi>"


def return_host(redirect_uri: str) -> str:
    """Where the browser goes back to, as the consent page names it: the host and port
    (never a user name before an ``@``), or the scheme of an app's own address."""
    target = urlsplit(redirect_uri)
    return target.netloc.rpartition("@")[2] or f"{target.scheme}:"
