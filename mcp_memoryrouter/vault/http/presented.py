"""Which memory key a request presents: the one reading that authentication and the rate
limit share, so a request is always counted against the key it acts with."""

from __future__ import annotations

from collections.abc import Iterable

from mcp_memoryrouter.edge.requests import repeated_header
from mcp_memoryrouter.errors import InvalidRequest

# In the order they are read: the first one present wins.
KEY_HEADERS = ("x-memory-key", "authorization", "x-api-key")
_SPELLING = {"x-memory-key": "X-Memory-Key", "authorization": "Authorization"}


def presented_key(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """X-Memory-Key, then ``Authorization: Bearer``, then x-api-key (raw ASGI headers).

    A key header sent twice, or as a comma-joined list, is refused (400): which copy is the
    caller would otherwise depend on who reads the headers."""
    headers = list(headers)
    repeated = repeated_header(headers, KEY_HEADERS)
    if repeated is not None:
        name = _SPELLING.get(repeated, repeated)
        raise InvalidRequest(
            f"the {name} header came more than once (or as a list): send one key, once",
            {"field": name},
        )
    values = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers}
    if values.get("x-memory-key"):
        return values["x-memory-key"]
    scheme, _, token = values.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return values.get("x-api-key") or None
