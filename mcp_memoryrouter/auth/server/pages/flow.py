"""One pending authorization request, as the sign-in and consent pages share it.

A request belongs to the browser that started it (the flow cookie of :mod:`browser`); its
pages carry no id in their URLs. Each form carries a token that must match the pending
request, and a form posted from another site is refused before it is read. Signing in binds
the request to a memory key (checked with the vault, sealed) and remembers the browser.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import TypeVar
from urllib.parse import urlsplit

from mcp.server.auth.handlers.authorize import AuthorizationHandler
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcp_memoryrouter.auth.display import shown
from mcp_memoryrouter.auth.resource import key_info_or_none
from mcp_memoryrouter.auth.scopes import scopes_for_key
from mcp_memoryrouter.auth.server.browser import SESSION_SECONDS, Cookies
from mcp_memoryrouter.auth.server.pages.html import (
    CONSENT_PATH,
    IdentityProvider,
    error_text,
    from_another_site,
    page,
    sign_in_body,
)
from mcp_memoryrouter.auth.server.provider import FLOW_PARAM, SIGN_IN_PATH, EmbeddedProvider
from mcp_memoryrouter.auth.state.database import off_loop
from mcp_memoryrouter.auth.state.store import PendingRequest, Session, digest
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.edge.requests import foreign_origin
from mcp_memoryrouter.errors import MemoryRouterError
from mcp_memoryrouter.pages.document import esc
from mcp_memoryrouter.schemas import KeyInfo

T = TypeVar("T")
Endpoint = Callable[[Request], Awaitable[Response]]


class Flow:
    """The pending request of this browser, its forms, its sign-in, and the pages' look."""

    def __init__(
        self,
        provider: EmbeddedProvider,
        vault: VaultClient,
        server_name: str,
        identity_providers: Sequence[IdentityProvider] = (),
    ) -> None:
        self.provider = provider
        self.store = provider.store
        self.vault = vault
        self.idps = {idp.key: idp for idp in identity_providers}
        self.server_name = server_name
        self.server = esc(server_name)  # HTML
        self.cookies = Cookies.for_issuer(provider.issuer)

    def page(self, title: str, body: str, status: int = 200) -> Response:
        return page(title, body, status, self.server_name)

    def refusal(self, reason: str, status: int, again: str) -> Response:
        return self.page("Sign-in refused", f"{error_text(reason)}<p>{again}</p>", status=status)

    def expired(self) -> Response:
        return self.page(
            "This sign-in has expired",
            "<p>Start connecting again from your app.</p>",
            status=400,
        )

    # /authorize ---------------------------------------------------------------------------

    def authorize(self, handler: AuthorizationHandler) -> Endpoint:
        """The SDK's handler, with the pending request's secret moved from the sign-in URL
        into the flow cookie, and its direct refusals shown to the person as a page."""
        sign_in = f"{self.provider.issuer}{SIGN_IN_PATH}"

        async def endpoint(request: Request) -> Response:
            response = await handler.handle(request)
            if response.status_code == 400:
                return self._bad_link(bytes(response.body))
            location = response.headers.get("location", "")
            if response.status_code == 302 and location.startswith(f"{sign_in}?{FLOW_PARAM}="):
                moved = RedirectResponse(sign_in, 302, headers={"Cache-Control": "no-store"})
                self.cookies.set_flow(moved, location.partition("=")[2])
                return moved
            return response

        return endpoint

    def _bad_link(self, body: bytes) -> Response:
        try:
            reason = str(json.loads(body).get("error_description") or "")
        except (ValueError, AttributeError):
            reason = ""
        said = shown(reason) if reason else "The app asked for something this server cannot grant."
        return self.page(
            "This connection link is not valid",
            f"<p>{said}</p>"
            "<p>Nothing was shared. Go back to the app and connect again; if this keeps "
            "happening, the app's settings for this server are wrong (an unknown client, or "
            "a return address it did not register).</p>",
            status=400,
        )

    # state --------------------------------------------------------------------------------

    async def db(self, work: Callable[[], T]) -> T:
        """The store's ``work``, off the event loop when the store is remote."""
        return await off_loop(self.store.remote, work)

    async def pending(self, request: Request) -> PendingRequest | None:
        flow = Cookies.flow(request)
        if flow is None:
            return None
        return await self.db(partial(self.store.request, digest(flow), self.provider.clock()))

    async def form(self, request: Request) -> tuple[PendingRequest | None, dict[str, list[str]]]:
        """This browser's pending request, if the form's token matches it."""
        form = await request.form()
        fields = {key: [str(v) for v in form.getlist(key)] for key in form}
        pending = await self.pending(request)
        sent = (fields.get("csrf") or [""])[0]
        if pending is None or not sent or not hmac.compare_digest(sent, pending.csrf):
            return None, fields
        return pending, fields

    def same_site(self, endpoint: Endpoint) -> Endpoint:
        """``endpoint`` (where a page's form is posted), refusing a form posted from another
        site: its Origin names neither the Host it was sent to nor the issuer's."""
        issuer = urlsplit(self.provider.issuer).netloc

        async def guarded(request: Request) -> Response:
            host = request.headers.get("host", "")
            if foreign_origin(request.headers.get("origin"), host, issuer):
                return from_another_site()
            return await endpoint(request)

        return guarded

    # signed in and out --------------------------------------------------------------------

    async def check(self, key: str | None) -> KeyInfo | MemoryRouterError | None:
        """What the vault says of ``key`` (None: refused), or the failure to ask it."""
        if not key:
            return None
        try:
            return await key_info_or_none(self.vault, key)
        except MemoryRouterError as exc:
            return exc

    def sign_in_page(self, pending: PendingRequest, message: str | None = None) -> Response:
        body = sign_in_body(pending, self.server, tuple(self.idps.values()), message)
        return self.page("Sign in", body, 200 if message is None else 400)

    async def signed_in(
        self, pending: PendingRequest, sealed: str, info: KeyInfo
    ) -> PendingRequest:
        signed_in = replace(
            pending,
            csrf=secrets.token_urlsafe(32),
            sealed_key=sealed,
            vault_ref=info.vault,
            allowed=sorted(scopes_for_key(info.read_only, info.mode)),
        )
        await self.db(partial(self.store.save_request, signed_in))
        return signed_in

    async def session_for(self, pending: PendingRequest, sealed: str, info: KeyInfo) -> Response:
        """Signed in: the pending request bound to the key, and the browser remembered."""
        signed_in = await self.signed_in(pending, sealed, info)
        secret = secrets.token_urlsafe(32)
        assert signed_in.sealed_key is not None
        expires = self.provider.clock() + SESSION_SECONDS
        session = Session(info.vault, signed_in.sealed_key, signed_in.allowed, expires)
        await self.db(partial(self.store.save_session, secret, session))
        response = RedirectResponse(CONSENT_PATH, status_code=303)
        self.cookies.set_session(response, secret)
        return response

    async def signed_out(self, request: Request, pending: PendingRequest) -> PendingRequest:
        """Forget the key this browser signed in with, for this request and its session."""
        secret = Cookies.session(request)
        if secret:
            await self.db(partial(self.store.end_session, secret))
        out = replace(
            pending, csrf=secrets.token_urlsafe(32), sealed_key=None, vault_ref=None, allowed=[]
        )
        await self.db(partial(self.store.save_request, out))
        return out
