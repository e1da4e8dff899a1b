"""The sign-in and consent pages' HTML: pure functions of what the pages know, in the
explorer's page shell (``pages/``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from mcp_memoryrouter.auth.display import shown
from mcp_memoryrouter.auth.server.browser import SESSION_SECONDS
from mcp_memoryrouter.auth.server.provider import SIGN_IN_PATH
from mcp_memoryrouter.auth.signin import Identity, OidcClient
from mcp_memoryrouter.auth.state.store import PendingRequest
from mcp_memoryrouter.pages.assets import STYLESHEET_PATH
from mcp_memoryrouter.pages.assets import stylesheet as stylesheet_bytes
from mcp_memoryrouter.pages.document import PRODUCT, alert, document, esc
from mcp_memoryrouter.pages.headers import ASSET_HEADERS, SIGN_IN_HEADERS

CONSENT_PATH = "/oauth/consent"
OIDC_START_PATH = "/oauth/oidc/start"
OIDC_CALLBACK_PATH = "/oauth/oidc/callback"
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
