"""Signing in to connect an app: with a memory key (proved once, sealed, never shown again;
the browser's session remembers it), or with an identity provider, which the explorer signs
people in through too."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable
from functools import partial

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcp_memoryrouter.abilities import abilities
from mcp_memoryrouter.auth.display import visible
from mcp_memoryrouter.auth.explorer_signin import ExplorerIdentity, IdentitySignedIn
from mcp_memoryrouter.auth.resource import key_info_or_none
from mcp_memoryrouter.auth.scopes import scopes_for_key
from mcp_memoryrouter.auth.server.browser import EXPLORER_LOGIN_COOKIE, Cookies
from mcp_memoryrouter.auth.server.pages.flow import Flow
from mcp_memoryrouter.auth.server.pages.html import (
    CONNECT_AGAIN,
    CONSENT_PATH,
    EXPLORER_AGAIN,
    UNREACHABLE,
    IdentityProvider,
    refused,
)
from mcp_memoryrouter.auth.server.provider import REQUEST_SECONDS
from mcp_memoryrouter.auth.signin import Identity, OidcRefused, admitted
from mcp_memoryrouter.auth.state.sealing import SealedElsewhere
from mcp_memoryrouter.auth.state.store import IdentityRow, OidcLogin, digest
from mcp_memoryrouter.errors import MemoryRouterError
from mcp_memoryrouter.schemas import KeyInfo

# The explorer (/ui) signs people in through the same provider and the same callback: its
# logins are bound to a cookie of their own (Lax, path /oauth: the provider's redirect back is
# a cross-site navigation, which never carries the explorer's Strict cookies).
EXPLORER_LOGIN = "explorer:"
ExplorerSignedIn = Callable[[IdentitySignedIn], Awaitable[Response]]


class SignIn:
    """The sign-in step of a pending request; ``explorer_signed_in`` is where a sign-in made
    for the explorer ends (None: this server serves no explorer)."""

    def __init__(self, flow: Flow, explorer_signed_in: ExplorerSignedIn | None = None) -> None:
        self._flow = flow
        self._explorer_signed_in = explorer_signed_in

    # with a memory key ---------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        flow = self._flow
        pending = await flow.pending(request)
        if pending is None:
            return flow.expired()
        if pending.sealed_key is not None:
            return RedirectResponse(CONSENT_PATH, status_code=303)
        secret = Cookies.session(request)
        session = (
            await flow.db(partial(flow.store.session, secret, flow.provider.clock()))
            if secret
            else None
        )
        if secret is None or session is None:
            return flow.sign_in_page(pending)
        info = await flow.check(flow.provider.unseal(session.sealed_key))
        if isinstance(info, KeyInfo) and info.vault == session.vault_ref:
            await flow.signed_in(pending, session.sealed_key, info)
            return RedirectResponse(CONSENT_PATH, status_code=303)
        response = flow.sign_in_page(pending)
        if not isinstance(info, MemoryRouterError):  # the key was revoked: so is the session
            await flow.db(partial(flow.store.end_session, secret))
            flow.cookies.clear_session(response)
        return response

    async def post(self, request: Request) -> Response:
        flow = self._flow
        pending, fields = await flow.form(request)
        if pending is None:
            return refused()
        if flow.idps:  # no memory key is ever typed here
            return refused()
        key = (fields.get("memory_key") or [""])[0].strip()
        info = await flow.check(key)
        if isinstance(info, MemoryRouterError):
            return flow.sign_in_page(pending, UNREACHABLE)
        if info is None or not scopes_for_key(info.read_only, info.mode):
            return flow.sign_in_page(pending, "That memory key was not accepted.")
        return await flow.session_for(pending, flow.provider.seal(key), info)

    # with an identity provider -------------------------------------------------------------

    async def oidc_start(self, request: Request) -> Response:
        flow = self._flow
        pending, fields = await flow.form(request)
        chosen = (fields.get("provider") or [""])[0]
        # one provider: its button may come from a page made before a second one was added
        idp = flow.idps.get(chosen) or (
            next(iter(flow.idps.values())) if len(flow.idps) == 1 and not chosen else None
        )
        if pending is None or idp is None:
            return refused()
        try:
            started = await idp.client.start(idp.state_prefix)
        except OidcRefused as refusal:
            return flow.sign_in_page(pending, refusal.reason)
        login = OidcLogin(pending.id, started.nonce, started.verifier, pending.expires_at)
        await flow.db(partial(flow.store.save_oidc_login, started.state, login))
        return RedirectResponse(started.url, status_code=303, headers={"Cache-Control": "no-store"})

    async def oidc_callback(self, request: Request) -> Response:
        """Where the identity provider sends the person back: the login this ``state`` names
        must be this browser's pending request (or explorer sign-in); then who they are,
        whether this server admits them, and their vault (made at their first sign-in)."""
        flow = self._flow
        query = request.query_params
        state, now = query.get("state", ""), flow.provider.clock()
        idp = flow.idps.get(state.partition(".")[0])
        if idp is None:
            return flow.page(
                "This sign-in cannot be finished",
                "<p>It did not come from an identity provider this server signs people in "
                "with. Nothing was shared. Start again from your app or the explorer.</p>",
                status=400,
            )
        login = await flow.db(partial(flow.store.take_oidc_login, state, now))
        if login is not None and login.request_id.startswith(EXPLORER_LOGIN):
            return await self._explorer_callback(request, idp, login)
        pending = await flow.pending(request)
        if login is None or pending is None or pending.id != login.request_id:
            return flow.page(
                "This sign-in cannot be finished",
                "<p>It expired, was already used, or was started in another browser. Nothing "
                "was shared. Start connecting again from your app.</p>",
                status=400,
            )
        try:
            found = await self._person_vault(request, idp, login, CONNECT_AGAIN)
        except MemoryRouterError:
            return flow.sign_in_page(pending, UNREACHABLE)
        if isinstance(found, Response):
            return found
        sealed, info = found
        return await flow.session_for(pending, sealed, info)

    async def _person_vault(
        self, request: Request, idp: IdentityProvider, login: OidcLogin, again: str
    ) -> tuple[str, KeyInfo] | Response:
        """The person ``idp`` signed in: their vault (sealed key, what it may do), or the
        page refusing them; ``MemoryRouterError`` when the vault could not be asked."""
        refusal = self._flow.refusal
        query = request.query_params
        if "error" in query:
            said = visible(query.get("error_description") or query.get("error") or "")
            return refusal(f"The identity provider did not sign you in: {said}", 403, again)
        try:
            person = await idp.client.identity(query.get("code", ""), login.verifier, login.nonce)
        except OidcRefused as refused_by:
            return refusal(refused_by.reason, refused_by.status, again)
        why = admitted(person, idp.allowed_domains, idp.allowed_emails)
        if why is not None:
            return refusal(why, 403, again)
        sealed, info = await self._vault_of(idp, person)
        if info is None:
            return refusal(
                "The key of your vault on this server was revoked, so it cannot be opened by "
                "signing in. Ask the server's operator.",
                403,
                again,
            )
        return sealed, info

    async def _vault_of(
        self, idp: IdentityProvider, person: Identity
    ) -> tuple[str, KeyInfo | None]:
        """The person's vault (sealed key, what it may do): made at their first sign-in."""
        flow = self._flow
        known = await flow.db(partial(flow.store.identity, person.issuer, person.subject))
        if known is None:
            new_key = await idp.provision(person)
            made_info = await key_info_or_none(flow.vault, new_key)
            assert made_info is not None
            made = IdentityRow(made_info.vault, flow.provider.seal(new_key))
            now = flow.provider.clock()
            known = await flow.db(
                partial(
                    flow.store.save_identity,
                    person.issuer,
                    person.subject,
                    made,
                    person.email,
                    now,
                )
            )
        key = flow.provider.unseal(known.sealed_key)
        if key is None:
            raise SealedElsewhere
        return known.sealed_key, await key_info_or_none(flow.vault, key)

    # the explorer's sign-in through the same provider --------------------------------------

    def explorer_identity(self) -> ExplorerIdentity | None:
        """What the explorer offers instead of a key form, when people sign in here with an
        identity provider."""
        if not self._flow.idps:
            return None
        offered = tuple((idp.key, idp.name) for idp in self._flow.idps.values())
        return ExplorerIdentity(offered, self._start_for_explorer)

    async def _start_for_explorer(self, key: str, next_path: str) -> Response:
        flow = self._flow
        idp = flow.idps.get(key)
        if idp is None:
            return flow.refusal("No such identity provider here.", 400, EXPLORER_AGAIN)
        try:
            started = await idp.client.start(idp.state_prefix)
        except OidcRefused as refusal:
            return flow.refusal(refusal.reason, refusal.status, EXPLORER_AGAIN)
        secret = secrets.token_urlsafe(32)
        bound = f"{EXPLORER_LOGIN}{digest(secret)}\n{next_path}"
        expires = flow.provider.clock() + REQUEST_SECONDS
        login = OidcLogin(bound, started.nonce, started.verifier, expires)
        await flow.db(partial(flow.store.save_oidc_login, started.state, login))
        response = RedirectResponse(
            started.url, status_code=303, headers={"Cache-Control": "no-store"}
        )
        flow.cookies.set_explorer_login(response, secret)
        return response

    async def _explorer_callback(
        self, request: Request, idp: IdentityProvider, login: OidcLogin
    ) -> Response:
        flow = self._flow
        binding, _, next_path = login.request_id.removeprefix(EXPLORER_LOGIN).partition("\n")
        secret = request.cookies.get(EXPLORER_LOGIN_COOKIE) or ""
        signed_in_to = self._explorer_signed_in
        if signed_in_to is None or not hmac.compare_digest(digest(secret), binding):
            return flow.page(
                "This sign-in cannot be finished",
                "<p>It was started in another browser, or this server no longer serves the "
                "explorer. Sign in again from the explorer.</p>",
                status=400,
            )
        try:
            found = await self._person_vault(request, idp, login, EXPLORER_AGAIN)
        except MemoryRouterError:
            return flow.refusal(UNREACHABLE, 503, EXPLORER_AGAIN)
        if isinstance(found, Response):
            return found
        sealed, info = found
        key = flow.provider.unseal(sealed)
        if key is None:
            raise SealedElsewhere
        read_only = not abilities(info.read_only, info.mode).writes
        response = await signed_in_to(IdentitySignedIn(info.vault, key, read_only, next_path))
        flow.cookies.clear_explorer_login(response)
        return response
