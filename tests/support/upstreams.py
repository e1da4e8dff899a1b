"""What the upstream doubles (the chat proxy's providers, the reflector's model) share: the
lifespan answered, and a request read whole."""

from __future__ import annotations

from starlette.types import Receive, Scope, Send


async def read_request(
    scope: Scope, receive: Receive, send: Send
) -> tuple[dict[str, str], bytes] | None:
    """The request's headers and whole body; None for the lifespan, answered here."""
    if scope["type"] == "lifespan":
        message = await receive()
        while message["type"] != "lifespan.shutdown":
            await send({"type": message["type"] + ".complete"})
            message = await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return None
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
    return headers, body
