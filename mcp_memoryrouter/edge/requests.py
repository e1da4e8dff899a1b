"""What a request carries that the edge judges before a route: the ``Host`` it was sent
to, the ``Origin`` of the page that sent it, and a credential header sent once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from mcp_memoryrouter.edge.addresses import host_name


def repeated_header(headers: Iterable[tuple[bytes, bytes]], names: Iterable[str]) -> str | None:
    """The first of ``names`` (lower case) that came more than once, or as a comma-joined
    list: a credential header must carry one value, or whoever reads the first and whoever
    reads the last would each see a different caller."""
    wanted = set(names)
    seen: set[str] = set()
    for raw, value in headers:
        name = raw.decode("latin-1").lower()
        if name not in wanted:
            continue
        if name in seen or b"," in value:
            return name
        seen.add(name)
    return None


def host_allowed(host: str, patterns: Sequence[str]) -> bool:
    """``host`` (a Host header: a name and an optional port) matches one of ``patterns``: an
    exact ``name`` or ``name:port``, or ``name:*`` for that name with any port."""
    host = host.lower()
    name = host_name(host)
    for pattern in (p.lower() for p in patterns):
        if pattern.endswith(":*") and name == pattern[:-2] and host != name:
            return True
        if host == pattern:
            return True
    return False


def foreign_origin(origin: str | None, *own: str) -> bool:
    """A request's ``Origin`` header names a site other than ``own`` (the ``Host`` it was
    sent to, and any other name this server has). An absent Origin is not foreign: browsers
    omit it on some navigations, and the forms' tokens and cookies still stand; ``null`` (a
    sandboxed frame, or a page sent with ``Referrer-Policy: no-referrer``) is."""
    if not origin:
        return False
    netloc = urlsplit(origin).netloc.lower()
    return all(netloc != name.lower() for name in own)
