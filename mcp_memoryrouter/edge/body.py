"""A request body read whole under a size limit and a deadline, then handed on again.

Every boundary that must see a body before its app does (the REST API's admission, the chat
proxy, the explorer's forms and upload, the authorization server's posts) reads it here, so
the limit, the ``Content-Length`` a client declares and the deadline mean the same thing
everywhere.
"""

from __future__ import annotations

import anyio
from starlette.types import Message, Receive, Scope

from mcp_memoryrouter.errors import RequestTimeout


def declared_over(scope: Scope, limit: int) -> bool:
    """The request says (``Content-Length``) that its body is over ``limit`` bytes."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length" and value.isdigit() and int(value) > limit:
            return True
    return False


async def read_body(
    receive: Receive, limit: int, seconds: float | None = None, *, scope: Scope | None = None
) -> bytes | None:
    """The whole request body, or None as soon as it passes ``limit`` bytes (or, with
    ``scope``, declares that it will). With ``seconds``, a body not whole by then raises
    :class:`RequestTimeout` (a client that declares a body and stalls holds no buffer for
    longer)."""
    if scope is not None and declared_over(scope, limit):
        return None
    if seconds is None:
        return await _read_body(receive, limit)
    try:
        with anyio.fail_after(seconds):
            return await _read_body(receive, limit)
    except TimeoutError:
        raise RequestTimeout(
            f"the request body did not arrive within {seconds:g} s: send it whole, at once",
            {"seconds": seconds},
        ) from None


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the buffered body to the app, then defers to the real one."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
