"""The sign-in and consent pages of the embedded authorization server.

Server-rendered, no JavaScript. A pending authorization request belongs to the browser that
started it (the flow cookie of :mod:`browser`); its pages carry no id in their URLs. The user
proves a memory key once (it is checked with the vault, sealed, and never shown again; the
browser's session remembers it), then ticks the scopes the client may have. Each form
carries a token that must match the pending request; the key is checked with the vault again
when consent is given. The pages cannot be framed (``frame-ancestors 'none'``,
``X-Frame-Options: DENY``).
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TypeVar
from urllib.parse import urlsplit

from mcp.server.auth.handlers.authorize import AuthorizationHandler
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from mcp_memoryrouter.abilities import abilities
from mcp_memoryrouter.auth.display import return_host, shown, visible
from mcp_memoryrouter.auth.resource import key_info_or_none
from mcp_memoryrouter.auth.scopes import Scope, scopes_for_key
from mcp_memoryrouter.auth.server.browser import (
    EXPLORER_LOGIN_COOKIE,
    SESSION_SECONDS,
    Cookies,
)
from mcp_memoryrouter.auth.server.consent import answers, asked, news
from mcp_memoryrouter.auth.server.provider import (
    FLOW_PARAM,
    REQUEST_SECONDS,
    SIGN_IN_PATH,
    EmbeddedProvider,
)
from mcp_memoryrouter.auth.signin import Identity, OidcClient, OidcRefused, admitted
from mcp_memoryrouter.auth.state.database import off_loop
from mcp_memoryrouter.auth.state.sealing import SealedElsewhere
from mcp_memoryrouter.auth.state.store import (
    IdentityRow,
    OidcLogin,
    PendingRequest,
    Session,
    digest,
)
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.edge.requests import foreign_origin
from mcp_memoryrouter.errors import MemoryRouterError
from mcp_memoryrouter.pages.assets import STYLESHEET_PATH
from mcp_memoryrouter.pages.assets import stylesheet as stylesheet_bytes
from mcp_memoryrouter.pages.document import PRODUCT, alert, document, esc
from mcp_memoryrouter.pages.headers import ASSET_HEADERS, SIGN_IN_HEADERS
from mcp_memoryrouter.schemas import KeyInfo

T = TypeVar("T")

CONSENT_PATH = "/oauth/consent"
OIDC_START_PATH = "/oauth/oidc/start"
OIDC_CALLBACK_PATH = "/oauth/oidc/callback"


@dataclass(frozen=True)
class IdentityProvider:
    """Sign-in with an OpenID Provider: the relying party, the name the button shows, who
    is admitted, and how a first sign-in gets its vault (a new vault's key, made by the
    server that serves the vault)."""

    client: OidcClient
    name: str
    provision: Callable[[Identity], Awaitable[str]]
    allowed_domains: tuple[str, ...] = ()
    allowed_emails: tuple[str, ...] = ()
    key: str = "p"  # names it in a sign-in's state: stable across replicas and restarts

    @property
    def state_prefix(self) -> str:
        return self.key + "."


# The explorer (/ui) signs people in through the same provider and the same callback: its
# logins are bound to a cookie of their own (Lax, path /oauth: the provider's redirect back is
# a cross-site navigation, which never carries the explorer's Strict cookies).
EXPLORER_LOGIN = "explorer:"


@dataclass(frozen=True)
class IdentitySignedIn:
    """A person the provider signed in for the explorer: their vault and its key."""

    vault_ref: str
    key: str
    read_only: bool
    next_path: str


@dataclass(frozen=True)
class ExplorerIdentity:
    """What the explorer's sign-in page offers: each provider's key and name, and the start
    of a sign-in with one of them (by key) that comes back to ``next_path``."""

    providers: tuple[tuple[str, str], ...]
    start: Callable[[str, str], Awaitable[Response]]


KEY_ORIGIN = (
    "A memory key is shown once, when its vault is created (<code>mcp-memoryrouter keys "
    "create</code>); whoever holds a key of the vault can make more. It starts with "
    "<code>mk_</code>."
)
STYLESHEET = stylesheet_bytes()
UNREACHABLE = "The vault could not be reached. Try again."
CONNECT_AGAIN = "Nothing was shared with the app. Start connecting again from your app."
EXPLORER_AGAIN = "Sign in again from the explorer."
SESSION_DAYS = SESSION_SECONDS // 86_400
Endpoint = Callable[[Request], Awaitable[Response]]


def page(title: str, body: str, status: int = 200, server: str | None = None) -> HTMLResponse:
    """A page in the explorer's look, naming the product and ``server`` (text), when known."""
    named = f'<p class="who">{esc(server)}</p>' if server else ""
    header = f'<header class="top"><p class="brand">{PRODUCT}</p>{named}</header>'
    html = document(
        title,
        body,
        site=PRODUCT,
        stylesheet_url=STYLESHEET_PATH,
        header=header,
        main_class="narrow",
    )
    return HTMLResponse(html, status_code=status, headers=SIGN_IN_HEADERS)


async def stylesheet(_: Request) -> Response:
    """The explorer's stylesheet, for the pages (served when the explorer is off too)."""
    return Response(STYLESHEET, media_type="text/css; charset=utf-8", headers=ASSET_HEADERS)


def error_text(message: str | None) -> str:
    return alert(message) if message else ""


def hidden(request: PendingRequest) -> str:
    return f'<input type="hidden" name="csrf" value="{esc(request.csrf)}">'


def client_words(pending: PendingRequest) -> str:
    """The client's name as what it is: its own claim, not checked by anyone."""
    name = pending.params.get("client_name")
    if not name:
        return "An app that gave no name"
    return f"An app calling itself <strong>&ldquo;{shown(str(name))}&rdquo;</strong>"


def refused() -> Response:
    return page("Request refused", "<p>The form was stale or forged.</p>", status=403)


def from_another_site() -> Response:
    return page(
        "Request refused",
        "<p>This form was sent from another site, not from this server's own page, so "
        "nothing was done and nothing was shared.</p><p>If you were connecting an app, start "
        "connecting again from the app: it sends you here, and you answer on this page.</p>",
        status=403,
    )


class Pages:
    def __init__(
        self,
        provider: EmbeddedProvider,
        vault: VaultClient,
        descriptions: dict[Scope, str],
        server_name: str,
        identity_providers: Sequence[IdentityProvider] = (),
    ) -> None:
        """``identity_providers``: people sign in with one of them instead of a memory key
        (``MEMORYROUTER_SIGNIN=oidc``)."""
        self._idps = {idp.key: idp for idp in identity_providers}
        # the explorer's session maker, handed in by the composition root when it serves both
        self.explorer_signed_in: Callable[[IdentitySignedIn], Awaitable[Response]] | None = None
        self._provider = provider
        self._store = provider.store
        self._vault = vault
        self._descriptions = descriptions
        self._server_name = server_name
        self._server = esc(server_name)  # HTML
        self._cookies = Cookies.for_issuer(provider.issuer)

    def _page(self, title: str, body: str, status: int = 200) -> Response:
        return page(title, body, status, self._server_name)

    # /authorize ---------------------------------------------------------------------------

    def authorize(self, handler: AuthorizationHandler) -> Endpoint:
        """The SDK's handler, with the pending request's secret moved from the sign-in URL
        into the flow cookie, and its direct refusals shown to the person as a page."""
        sign_in = f"{self._provider.issuer}{SIGN_IN_PATH}"

        async def endpoint(request: Request) -> Response:
            response = await handler.handle(request)
            if response.status_code == 400:
                return self._bad_link(bytes(response.body))
            location = response.headers.get("location", "")
            if response.status_code == 302 and location.startswith(f"{sign_in}?{FLOW_PARAM}="):
                moved = RedirectResponse(sign_in, 302, headers={"Cache-Control": "no-store"})
                self._cookies.set_flow(moved, location.partition("=")[2])
                return moved
            return response

        return endpoint

    def _bad_link(self, body: bytes) -> Response:
        try:
            reason = str(json.loads(body).get("error_description") or "")
        except (ValueError, AttributeError):
            reason = ""
        said = shown(reason) if reason else "The app asked for something this server cannot grant."
        return self._page(
            "This connection link is not valid",
            f"<p>{said}</p>"
            "<p>Nothing was shared. Go back to the app and connect again; if this keeps "
            "happening, the app's settings for this server are wrong (an unknown client, or "
            "a return address it did not register).</p>",
            status=400,
        )

    # state --------------------------------------------------------------------------------

    async def _db(self, work: Callable[[], T]) -> T:
        """The store's ``work``, off the event loop when the store is remote."""
        return await off_loop(self._store.remote, work)

    async def _pending(self, request: Request) -> PendingRequest | None:
        flow = Cookies.flow(request)
        if flow is None:
            return None
        return await self._db(partial(self._store.request, digest(flow), self._provider.clock()))

    async def _form(self, request: Request) -> tuple[PendingRequest | None, dict[str, list[str]]]:
        """This browser's pending request, if the form's token matches it."""
        form = await request.form()
        fields = {key: [str(v) for v in form.getlist(key)] for key in form}
        pending = await self._pending(request)
        sent = (fields.get("csrf") or [""])[0]
        if pending is None or not sent or not hmac.compare_digest(sent, pending.csrf):
            return None, fields
        return pending, fields

    async def _signed_in(
        self, pending: PendingRequest, sealed: str, info: KeyInfo
    ) -> PendingRequest:
        signed_in = replace(
            pending,
            csrf=secrets.token_urlsafe(32),
            sealed_key=sealed,
            vault_ref=info.vault,
            allowed=sorted(scopes_for_key(info.read_only, info.mode)),
        )
        await self._db(partial(self._store.save_request, signed_in))
        return signed_in

    async def _signed_out(self, pending: PendingRequest) -> PendingRequest:
        out = replace(
            pending, csrf=secrets.token_urlsafe(32), sealed_key=None, vault_ref=None, allowed=[]
        )
        await self._db(partial(self._store.save_request, out))
        return out

    def _expired(self) -> Response:
        return self._page(
            "This sign-in has expired",
            "<p>Start connecting again from your app.</p>",
            status=400,
        )

    def same_site(self, endpoint: Endpoint) -> Endpoint:
        """``endpoint`` (where a page's form is posted), refusing a form posted from another
        site: its Origin names neither the Host it was sent to nor the issuer's."""
        issuer = urlsplit(self._provider.issuer).netloc

        async def guarded(request: Request) -> Response:
            host = request.headers.get("host", "")
            if foreign_origin(request.headers.get("origin"), host, issuer):
                return from_another_site()
            return await endpoint(request)

        return guarded

    # sign-in ------------------------------------------------------------------------------

    async def sign_in(self, request: Request) -> Response:
        pending = await self._pending(request)
        if pending is None:
            return self._expired()
        if pending.sealed_key is not None:
            return RedirectResponse(CONSENT_PATH, status_code=303)
        secret = Cookies.session(request)
        session = (
            await self._db(partial(self._store.session, secret, self._provider.clock()))
            if secret
            else None
        )
        if secret is None or session is None:
            return self._sign_in_page(pending)
        info = await self._check(self._provider.unseal(session.sealed_key))
        if isinstance(info, KeyInfo) and info.vault == session.vault_ref:
            await self._signed_in(pending, session.sealed_key, info)
            return RedirectResponse(CONSENT_PATH, status_code=303)
        response = self._sign_in_page(pending)
        if not isinstance(info, MemoryRouterError):  # the key was revoked: so is the session
            await self._db(partial(self._store.end_session, secret))
            self._cookies.clear_session(response)
        return response

    async def _check(self, key: str | None) -> KeyInfo | MemoryRouterError | None:
        """What the vault says of ``key`` (None: refused), or the failure to ask it."""
        if not key:
            return None
        try:
            return await key_info_or_none(self._vault, key)
        except MemoryRouterError as exc:
            return exc

    def _sign_in_page(self, pending: PendingRequest, message: str | None = None) -> Response:
        body = sign_in_body(pending, self._server, tuple(self._idps.values()), message)
        return self._page("Sign in", body, 200 if message is None else 400)

    async def sign_in_post(self, request: Request) -> Response:
        pending, fields = await self._form(request)
        if pending is None:
            return refused()
        if self._idps:  # no memory key is ever typed here
            return refused()
        key = (fields.get("memory_key") or [""])[0].strip()
        info = await self._check(key)
        if isinstance(info, MemoryRouterError):
            return self._sign_in_page(pending, UNREACHABLE)
        if info is None or not scopes_for_key(info.read_only, info.mode):
            return self._sign_in_page(pending, "That memory key was not accepted.")
        return await self._session_for(pending, self._provider.seal(key), info)

    async def _session_for(self, pending: PendingRequest, sealed: str, info: KeyInfo) -> Response:
        """Signed in: the pending request bound to the key, and the browser remembered."""
        signed_in = await self._signed_in(pending, sealed, info)
        secret = secrets.token_urlsafe(32)
        assert signed_in.sealed_key is not None
        expires = self._provider.clock() + SESSION_SECONDS
        session = Session(info.vault, signed_in.sealed_key, signed_in.allowed, expires)
        await self._db(partial(self._store.save_session, secret, session))
        response = RedirectResponse(CONSENT_PATH, status_code=303)
        self._cookies.set_session(response, secret)
        return response

    # sign-in with an identity provider -----------------------------------------------------

    async def oidc_start(self, request: Request) -> Response:
        pending, fields = await self._form(request)
        chosen = (fields.get("provider") or [""])[0]
        # one provider: its button may come from a page made before a second one was added
        idp = self._idps.get(chosen) or (
            next(iter(self._idps.values())) if len(self._idps) == 1 and not chosen else None
        )
        if pending is None or idp is None:
            return refused()
        try:
            started = await idp.client.start(idp.state_prefix)
        except OidcRefused as refusal:
            return self._sign_in_page(pending, refusal.reason)
        login = OidcLogin(pending.id, started.nonce, started.verifier, pending.expires_at)
        await self._db(partial(self._store.save_oidc_login, started.state, login))
        return RedirectResponse(started.url, status_code=303, headers={"Cache-Control": "no-store"})

    async def oidc_callback(self, request: Request) -> Response:
        """Where the identity provider sends the person back: the login this ``state`` names
        must be this browser's pending request (or explorer sign-in); then who they are,
        whether this server admits them, and their vault (made at their first sign-in)."""
        query = request.query_params
        state, now = query.get("state", ""), self._provider.clock()
        idp = self._idps.get(state.partition(".")[0])
        if idp is None:
            return self._page(
                "This sign-in cannot be finished",
                "<p>It did not come from an identity provider this server signs people in "
                "with. Nothing was shared. Start again from your app or the explorer.</p>",
                status=400,
            )
        login = await self._db(partial(self._store.take_oidc_login, state, now))
        if login is not None and login.request_id.startswith(EXPLORER_LOGIN):
            return await self._explorer_callback(request, idp, login)
        pending = await self._pending(request)
        if login is None or pending is None or pending.id != login.request_id:
            return self._page(
                "This sign-in cannot be finished",
                "<p>It expired, was already used, or was started in another browser. Nothing "
                "was shared. Start connecting again from your app.</p>",
                status=400,
            )
        try:
            found = await self._person_vault(request, idp, login, CONNECT_AGAIN)
        except MemoryRouterError:
            return self._sign_in_page(pending, UNREACHABLE)
        if isinstance(found, Response):
            return found
        sealed, info = found
        return await self._session_for(pending, sealed, info)

    async def _person_vault(
        self, request: Request, idp: IdentityProvider, login: OidcLogin, again: str
    ) -> tuple[str, KeyInfo] | Response:
        """The person ``idp`` signed in: their vault (sealed key, what it may do), or the
        page refusing them; ``MemoryRouterError`` when the vault could not be asked."""
        query = request.query_params
        if "error" in query:
            said = visible(query.get("error_description") or query.get("error") or "")
            return self._refusal(f"The identity provider did not sign you in: {said}", 403, again)
        try:
            person = await idp.client.identity(query.get("code", ""), login.verifier, login.nonce)
        except OidcRefused as refusal:
            return self._refusal(refusal.reason, refusal.status, again)
        why = admitted(person, idp.allowed_domains, idp.allowed_emails)
        if why is not None:
            return self._refusal(why, 403, again)
        sealed, info = await self._vault_of(idp, person)
        if info is None:
            return self._refusal(
                "The key of your vault on this server was revoked, so it cannot be opened by "
                "signing in. Ask the server's operator.",
                403,
                again,
            )
        return sealed, info

    # the explorer's sign-in through the same provider --------------------------------------

    def explorer_identity(self) -> ExplorerIdentity | None:
        """What the explorer offers instead of a key form, when people sign in here with an
        identity provider."""
        if not self._idps:
            return None
        offered = tuple((idp.key, idp.name) for idp in self._idps.values())
        return ExplorerIdentity(offered, self._start_for_explorer)

    async def _start_for_explorer(self, key: str, next_path: str) -> Response:
        idp = self._idps.get(key)
        if idp is None:
            return self._refusal("No such identity provider here.", 400, EXPLORER_AGAIN)
        try:
            started = await idp.client.start(idp.state_prefix)
        except OidcRefused as refusal:
            return self._refusal(refusal.reason, refusal.status, EXPLORER_AGAIN)
        secret = secrets.token_urlsafe(32)
        bound = f"{EXPLORER_LOGIN}{digest(secret)}\n{next_path}"
        expires = self._provider.clock() + REQUEST_SECONDS
        login = OidcLogin(bound, started.nonce, started.verifier, expires)
        await self._db(partial(self._store.save_oidc_login, started.state, login))
        response = RedirectResponse(
            started.url, status_code=303, headers={"Cache-Control": "no-store"}
        )
        self._cookies.set_explorer_login(response, secret)
        return response

    async def _explorer_callback(
        self, request: Request, idp: IdentityProvider, login: OidcLogin
    ) -> Response:
        binding, _, next_path = login.request_id.removeprefix(EXPLORER_LOGIN).partition("\n")
        secret = request.cookies.get(EXPLORER_LOGIN_COOKIE) or ""
        if self.explorer_signed_in is None or not hmac.compare_digest(digest(secret), binding):
            return self._page(
                "This sign-in cannot be finished",
                "<p>It was started in another browser, or this server no longer serves the "
                "explorer. Sign in again from the explorer.</p>",
                status=400,
            )
        try:
            found = await self._person_vault(request, idp, login, EXPLORER_AGAIN)
        except MemoryRouterError:
            return self._refusal(UNREACHABLE, 503, EXPLORER_AGAIN)
        if isinstance(found, Response):
            return found
        sealed, info = found
        key = self._provider.unseal(sealed)
        if key is None:
            raise SealedElsewhere
        read_only = not abilities(info.read_only, info.mode).writes
        signed_in = IdentitySignedIn(info.vault, key, read_only, next_path)
        response = await self.explorer_signed_in(signed_in)
        self._cookies.clear_explorer_login(response)
        return response

    async def _vault_of(
        self, idp: IdentityProvider, person: Identity
    ) -> tuple[str, KeyInfo | None]:
        """The person's vault (sealed key, what it may do): made at their first sign-in."""
        known = await self._db(partial(self._store.identity, person.issuer, person.subject))
        if known is None:
            new_key = await idp.provision(person)
            made_info = await key_info_or_none(self._vault, new_key)
            assert made_info is not None
            made = IdentityRow(made_info.vault, self._provider.seal(new_key))
            now = self._provider.clock()
            known = await self._db(
                partial(
                    self._store.save_identity,
                    person.issuer,
                    person.subject,
                    made,
                    person.email,
                    now,
                )
            )
        key = self._provider.unseal(known.sealed_key)
        if key is None:
            raise SealedElsewhere
        return known.sealed_key, await key_info_or_none(self._vault, key)

    def _refusal(self, reason: str, status: int, again: str) -> Response:
        return self._page("Sign-in refused", f"{error_text(reason)}<p>{again}</p>", status=status)

    # consent ------------------------------------------------------------------------------

    async def consent(self, request: Request) -> Response:
        pending = await self._pending(request)
        if pending is None:
            return self._expired()
        if pending.sealed_key is None:
            return RedirectResponse(SIGN_IN_PATH, status_code=303)
        return await self._consent_page(pending)

    async def _consent_page(self, pending: PendingRequest, message: str | None = None) -> Response:
        """What the app asks for, in words, every scope it asked for ticked; at a step-up
        (this app holds a grant in this vault already) what it asks for anew is named."""
        before = await self._db(
            partial(self._store.granted, pending.client_id, pending.vault_ref or "")
        )
        scopes = asked(pending.params["scopes"], pending.allowed, before, self._descriptions)
        step_up = any(one.new for one in scopes)
        lead = consent_lead(pending, self._server, step_up=step_up)
        form = answers(
            CONSENT_PATH,
            pending.csrf,
            scopes,
            shown(return_host(pending.params["redirect_uri"])),
            shown(pending.client_id),
        )
        body = f"{news(client_words(pending), scopes)}{lead}{error_text(message)}{form}"
        title = "Allow more access?" if step_up else "Allow access?"
        return self._page(title, body, 200 if message is None else 400)

    async def consent_post(self, request: Request) -> Response:
        pending, fields = await self._form(request)
        if pending is None or pending.sealed_key is None:
            return refused()
        decision = (fields.get("decision") or [""])[0]
        if decision == "switch":
            return await self._switch(request, pending)
        if decision != "allow":
            return self._finish(await self._db(partial(self._provider.deny, pending)))
        ticked = set(fields.get("scope", []))
        # Only what was requested, ticked, and the key may grant (never an escalation).
        chosen = [s for s in pending.params["scopes"] if s in ticked and s in pending.allowed]
        if not chosen:
            return await self._consent_page(pending, "Tick at least one permission, or deny.")
        info = await self._check(self._provider.unseal(pending.sealed_key))
        if isinstance(info, MemoryRouterError):
            return await self._consent_page(pending, UNREACHABLE)
        if info is None or info.vault != pending.vault_ref:
            response = self._sign_in_page(
                await self._switched(request, pending),
                "That memory key has been revoked. Sign in with another key of the vault.",
            )
            self._cookies.clear_session(response)
            return response
        return self._finish(await self._db(partial(self._provider.approve, pending, chosen)))

    async def _switched(self, request: Request, pending: PendingRequest) -> PendingRequest:
        """Forget the key this browser signed in with, for this request and its session."""
        secret = Cookies.session(request)
        if secret:
            await self._db(partial(self._store.end_session, secret))
        return await self._signed_out(pending)

    async def _switch(self, request: Request, pending: PendingRequest) -> Response:
        await self._switched(request, pending)
        response = RedirectResponse(SIGN_IN_PATH, status_code=303)
        self._cookies.clear_session(response)
        return response

    def _finish(self, location: str) -> Response:
        """Back to the client; the pending request is gone, and so is its cookie."""
        response = RedirectResponse(location, status_code=303)
        self._cookies.clear_flow(response)
        return response


# the pages' HTML: pure functions of what the pages know -------------------------------------


def sign_in_body(
    pending: PendingRequest,
    server: str,
    idps: Sequence[IdentityProvider],
    message: str | None = None,
) -> str:
    """Who asks for the vault on ``server`` (HTML), then a button for each identity provider
    (``idps``), or else the memory key's form; ``message``: why the last try failed."""
    asking = (
        f"<p>{client_words(pending)} wants to use your memory vault on "
        f"<strong>{server}</strong>.</p>"
    )
    if idps:
        return (
            f'{asking}{error_text(message)}<div class="card">{provider_buttons(pending, idps)}'
            '<p class="note">The first time, a memory vault of your own is made for you. '
            f"This browser stays signed in for {SESSION_DAYS} days.</p></div>"
        )
    return (
        f"{asking}<p>Sign in with a memory key of that vault. It is checked, kept encrypted on "
        "this server, and never shown again; this browser stays signed in for "
        f"{SESSION_DAYS} days, until you revoke the key.</p>"
        f"{error_text(message)}{key_form(pending)}"
    )


def provider_buttons(pending: PendingRequest, idps: Sequence[IdentityProvider]) -> str:
    return "".join(
        f'<form method="post" action="{OIDC_START_PATH}">{hidden(pending)}'
        f'<input type="hidden" name="provider" value="{esc(idp.key)}">'
        f'<button type="submit">Continue with {esc(idp.name)}</button></form>'
        for idp in idps
    )


def key_form(pending: PendingRequest) -> str:
    return (
        f'<form method="post" action="{SIGN_IN_PATH}" class="card">{hidden(pending)}'
        '<label for="memory_key">Memory key</label>'
        '<input id="memory_key" name="memory_key" type="password" autocomplete="off" '
        'required aria-describedby="key-note" spellcheck="false">'
        f'<p id="key-note" class="note">{KEY_ORIGIN}</p>'
        '<button type="submit">Continue</button></form>'
    )


def consent_lead(pending: PendingRequest, server: str, *, step_up: bool) -> str:
    """Who asks for which vault on ``server`` (HTML); at a step-up, that the app is
    connected already."""
    vault = f"<code>{esc(pending.vault_ref or '')}</code>"
    if step_up:
        return (
            f"<p>It is connected to your memory vault {vault} on <strong>{server}</strong> "
            "already; what you allowed before stays ticked.</p>"
        )
    return (
        f"<p>{client_words(pending)} wants to use your memory vault {vault} on "
        f"<strong>{server}</strong>.</p>"
    )
