"""What the chat proxy refuses from a request's headers alone, before it reads anything
else: another name in ``Host`` (a local server without keys: DNS rebinding), a memory or
provider key header sent twice, a call from a web page of another site (``Origin``), and a
body that is not JSON (what an HTML form or a no-cors fetch can send). Pure."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.datastructures import Headers

from mcp_memoryrouter.edge.requests import foreign_origin, host_allowed, repeated_header
from mcp_memoryrouter.errors import Forbidden, InvalidRequest, Misdirected, UnsupportedMedia
from mcp_memoryrouter.proxy.options import MEMORY_KEY, PROVIDER_KEY, header_text


@dataclass(frozen=True)
class Admission:
    """``hosts``: when given, the only ``Host`` names a call may carry; ``origins``: the web
    origins (lower case, no trailing slash) besides this server's own whose pages may call."""

    hosts: tuple[str, ...] | None
    origins: frozenset[str]

    def check(self, headers: Headers, *, json_body: bool = True) -> None:
        """Raise the refusal the headers earn, if any."""
        if self.hosts is not None and not host_allowed(headers.get("host", ""), self.hosts):
            raise Misdirected(
                "this server does not answer to that name: set MEMORYROUTER_PUBLIC_URL, "
                "or add the name to MEMORYROUTER_ALLOWED_HOSTS"
            )
        repeated = repeated_header(headers.raw, (MEMORY_KEY, PROVIDER_KEY))
        if repeated is not None:
            raise InvalidRequest(
                f"the {repeated} header came more than once (or as a list): send it once",
                {"field": repeated},
            )
        origin = headers.get("origin")
        if origin is not None and not self._same_or_allowed(origin, headers.get("host")):
            raise Forbidden(
                f"calls from web pages of {header_text(origin, 100)} are refused: call from "
                "your app's server, or add the origin to MEMORYROUTER_CORS_ORIGINS",
                {"origin": header_text(origin, 100)},
            )
        if json_body and not is_json(headers.get("content-type", "")):
            raise UnsupportedMedia(
                "the body must be JSON: send it with Content-Type: application/json",
                {"content_type": header_text(headers.get("content-type", ""), 100)},
            )

    def _same_or_allowed(self, origin: str, host: str | None) -> bool:
        """A page of this server itself (its origin names the host the call was sent to:
        the pages' and the explorer's rule) or of an origin the operator allows
        (MEMORYROUTER_CORS_ORIGINS)."""
        if origin.rstrip("/").lower() in self.origins:
            return True
        return bool(origin) and host is not None and not foreign_origin(origin, host)


def is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )
