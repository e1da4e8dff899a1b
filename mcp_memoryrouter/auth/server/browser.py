"""The cookies of the sign-in and consent pages, all HttpOnly, SameSite=Lax, path /oauth.

- The flow cookie carries the secret of one pending authorization request. /authorize sets
  it on its redirect, so the request is bound to the browser that started it: nobody else
  can load its pages or answer them, and no URL (nor any access log) ever names it.
- The session cookie remembers, for 30 days, a browser that signed in with a memory key, so a
  step-up or a reconnection shows the consent page only. The server keeps a digest of its
  secret, the vault it is bound to and the sealed key; the key is checked with the vault each
  time the session is used, so revoking the key ends the session.
- The explorer's login cookie binds a sign-in the explorer sent to the identity provider to
  the browser that started it, for the callback under /oauth.

A form posted from another site is refused by one rule, :func:`asgi.foreign_origin`, here and in
the explorer.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from mcp_memoryrouter.auth.server.provider import REQUEST_SECONDS
from mcp_memoryrouter.edge.addresses import is_loopback

FLOW_COOKIE = "memoryrouter_flow"
# binds a sign-in the explorer started to its browser, until the provider sends it back
EXPLORER_LOGIN_COOKIE = "memoryrouter_explorer_login"
SESSION_COOKIE = "memoryrouter_session"
SESSION_SECONDS = 30 * 86_400
COOKIE_PATH = "/oauth"


@dataclass(frozen=True)
class Cookies:
    flow_secure: bool
    session_secure: bool

    @classmethod
    def for_issuer(cls, issuer: str) -> Cookies:
        """Secure over https; the session cookie also over http unless on loopback (where a
        development server runs without TLS), so it is never sent in clear across a network."""
        parts = urlsplit(issuer)
        https = parts.scheme == "https"
        return cls(flow_secure=https, session_secure=https or not is_loopback(parts.hostname))

    def set_flow(self, response: Response, secret: str) -> None:
        self._set(response, FLOW_COOKIE, secret, REQUEST_SECONDS, self.flow_secure)

    def set_session(self, response: Response, secret: str) -> None:
        self._set(response, SESSION_COOKIE, secret, SESSION_SECONDS, self.session_secure)

    def set_explorer_login(self, response: Response, secret: str) -> None:
        self._set(response, EXPLORER_LOGIN_COOKIE, secret, REQUEST_SECONDS, self.flow_secure)

    def clear_explorer_login(self, response: Response) -> None:
        self._set(response, EXPLORER_LOGIN_COOKIE, "", 0, self.flow_secure)

    def clear_flow(self, response: Response) -> None:
        self._set(response, FLOW_COOKIE, "", 0, self.flow_secure)

    def clear_session(self, response: Response) -> None:
        self._set(response, SESSION_COOKIE, "", 0, self.session_secure)

    @staticmethod
    def flow(request: Request) -> str | None:
        return request.cookies.get(FLOW_COOKIE) or None

    @staticmethod
    def session(request: Request) -> str | None:
        return request.cookies.get(SESSION_COOKIE) or None

    @staticmethod
    def _set(response: Response, name: str, value: str, max_age: int, secure: bool) -> None:
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path=COOKIE_PATH,
            secure=secure,
            httponly=True,
            samesite="lax",
        )
