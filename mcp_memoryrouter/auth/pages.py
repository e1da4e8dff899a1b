"""The sign-in and consent pages of the embedded authorization server.

Server-rendered, no JavaScript. The user proves a memory key once (it is checked with the
vault, sealed, and never shown again), then ticks the scopes the client may have. Both forms
carry a CSRF token that must match the pending request and a cookie set with the form; the
pages cannot be framed (``frame-ancestors 'none'``, ``X-Frame-Options: DENY``).
"""

from __future__ import annotations

import hmac
import secrets
from html import escape
from typing import cast
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from mcp_memoryrouter.auth.provider import REQUEST_SECONDS, EmbeddedProvider
from mcp_memoryrouter.auth.scopes import Scope, scopes_for_key
from mcp_memoryrouter.auth.store import PendingRequest
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.errors import Forbidden, MemoryRouterError, Unauthorized

CSRF_COOKIE = "memoryrouter_csrf_"  # + the pending request's id prefix: one per sign-in
CONSENT_PATH = "/oauth/consent"
SECURITY_HEADERS = {
    # No form-action: browsers apply it to the redirect to the client's callback as well.
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}
STYLE = """
body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;
line-height:1.5;color:#1a1a1a}
label{display:block;margin:.5rem 0}input[type=password]{width:100%;padding:.5rem;font-size:1rem}
button{padding:.5rem 1rem;font-size:1rem;margin:1rem .5rem 0 0}
.error{color:#a00000;font-weight:600}.note{color:#555;font-size:.9rem}
fieldset{border:1px solid #ccc;padding:.5rem 1rem}
"""


def page(title: str, body: str, status: int = 200) -> HTMLResponse:
    document = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>"
        f"<body><main><h1>{escape(title)}</h1>{body}</main></body></html>"
    )
    return HTMLResponse(document, status_code=status, headers=SECURITY_HEADERS)


def cookie_name(request_id: str) -> str:
    return CSRF_COOKIE + request_id[:16]


def error_text(message: str | None) -> str:
    return f'<p class="error" role="alert">{escape(message)}</p>' if message else ""


def hidden(request: PendingRequest) -> str:
    return (
        f'<input type="hidden" name="request" value="{escape(request.id)}">'
        f'<input type="hidden" name="csrf" value="{escape(request.csrf)}">'
    )


class Pages:
    def __init__(
        self, provider: EmbeddedProvider, vault: VaultClient, descriptions: dict[Scope, str]
    ) -> None:
        self._provider = provider
        self._vault = vault
        self._descriptions = descriptions
        self._secure = provider.issuer.startswith("https://")

    def _pending(self, request_id: str | None) -> PendingRequest | None:
        if not request_id:
            return None
        return self._provider.store.request(request_id, self._provider.clock())

    def _expired(self) -> Response:
        return page(
            "This sign-in has expired",
            "<p>Start connecting again from your app.</p>",
            status=400,
        )

    def _with_cookie(self, response: HTMLResponse, pending: PendingRequest) -> HTMLResponse:
        response.set_cookie(
            cookie_name(pending.id),
            pending.csrf,
            max_age=REQUEST_SECONDS,
            httponly=True,
            samesite="lax",
            path="/oauth",
            secure=self._secure,
        )
        return response

    async def _form(self, request: Request) -> tuple[PendingRequest | None, dict[str, list[str]]]:
        """The pending request a POST names, if its CSRF token and cookie both match."""
        form = await request.form()
        fields = {key: [str(v) for v in form.getlist(key)] for key in form}
        pending = self._pending((fields.get("request") or [""])[0])
        sent = (fields.get("csrf") or [""])[0]
        cookie = request.cookies.get(cookie_name(pending.id), "") if pending else ""
        if pending is None or not sent or not cookie:
            return None, fields
        if hmac.compare_digest(sent, pending.csrf) and hmac.compare_digest(cookie, pending.csrf):
            return pending, fields
        return None, fields

    # sign-in ------------------------------------------------------------------------------

    async def sign_in(self, request: Request) -> Response:
        pending = self._pending(request.query_params.get("request"))
        if pending is None:
            return self._expired()
        return self._sign_in_page(pending)

    def _sign_in_page(self, pending: PendingRequest, message: str | None = None) -> Response:
        client = escape(str(pending.params["client_name"]))
        body = (
            f"<p><strong>{client}</strong> wants to use your MemoryRouter memory vault.</p>"
            "<p>Sign in with a memory key of that vault. It is checked once, kept encrypted "
            "on this server for this connection only, and never shown again.</p>"
            f"{error_text(message)}"
            '<form method="post" action="/oauth/sign-in">'
            f"{hidden(pending)}"
            '<label for="memory_key">Memory key</label>'
            '<input id="memory_key" name="memory_key" type="password" autocomplete="off" '
            'required aria-describedby="key-note" spellcheck="false">'
            '<p id="key-note" class="note">It starts with <code>mk_</code>.</p>'
            '<button type="submit">Continue</button></form>'
        )
        status = 200 if message is None else 400
        return self._with_cookie(page("Sign in", body, status), pending)

    async def sign_in_post(self, request: Request) -> Response:
        pending, fields = await self._form(request)
        if pending is None:
            return page("Request refused", "<p>The form was stale or forged.</p>", status=403)
        key = (fields.get("memory_key") or [""])[0].strip()
        try:
            info = await self._vault.with_key(key).key_info() if key else None
        except (Unauthorized, Forbidden):
            info = None
        except MemoryRouterError:
            return self._sign_in_page(pending, "The vault could not be reached. Try again.")
        allowed: list[str] = (
            [] if info is None else sorted(scopes_for_key(info.read_only, info.mode))
        )
        if info is None or not allowed:
            return self._sign_in_page(pending, "That memory key was not accepted.")
        signed_in = PendingRequest(
            id=pending.id,
            client_id=pending.client_id,
            params=pending.params,
            csrf=secrets.token_urlsafe(32),
            sealed_key=self._provider.seal(key),
            vault_ref=info.vault,
            allowed=allowed,
            expires_at=pending.expires_at,
        )
        self._provider.store.save_request(signed_in)
        return RedirectResponse(f"{CONSENT_PATH}?request={pending.id}", status_code=303)

    # consent ------------------------------------------------------------------------------

    async def consent(self, request: Request) -> Response:
        pending = self._pending(request.query_params.get("request"))
        if pending is None:
            return self._expired()
        if pending.sealed_key is None:
            return RedirectResponse(f"/oauth/sign-in?request={pending.id}", status_code=303)
        return self._consent_page(pending)

    def _consent_page(self, pending: PendingRequest, message: str | None = None) -> Response:
        client = escape(str(pending.params["client_name"]))
        target = escape(urlsplit(pending.params["redirect_uri"]).netloc or "the app")
        boxes = "".join(self._checkbox(pending, scope) for scope in pending.params["scopes"])
        body = (
            f"<p><strong>{client}</strong> asks for access to the memory vault "
            f"<code>{escape(pending.vault_ref or '')}</code>.</p>"
            f'<p class="note">Client id: <code>{escape(pending.client_id)}</code>. '
            f"After you choose you return to <strong>{target}</strong>.</p>"
            f"{error_text(message)}"
            f'<form method="post" action="{CONSENT_PATH}">{hidden(pending)}'
            f"<fieldset><legend>Allow {client} to</legend>{boxes}</fieldset>"
            '<button type="submit" name="decision" value="allow">Allow</button>'
            '<button type="submit" name="decision" value="deny">Deny</button></form>'
        )
        status = 200 if message is None else 400
        return self._with_cookie(page("Allow access?", body, status), pending)

    def _checkbox(self, pending: PendingRequest, scope: str) -> str:
        described = escape(self._descriptions.get(cast(Scope, scope), scope))
        ident = "scope-" + scope.replace(":", "-")
        if scope not in pending.allowed:
            return (
                f'<label for="{ident}"><input type="checkbox" id="{ident}" disabled> '
                f"<code>{escape(scope)}</code>: {described} "
                '<span class="note">(not possible with this key)</span></label>'
            )
        return (
            f'<label for="{ident}"><input type="checkbox" id="{ident}" name="scope" '
            f'value="{escape(scope)}" checked> <code>{escape(scope)}</code>: {described}</label>'
        )

    async def consent_post(self, request: Request) -> Response:
        pending, fields = await self._form(request)
        if pending is None or pending.sealed_key is None:
            return page("Request refused", "<p>The form was stale or forged.</p>", status=403)
        if (fields.get("decision") or [""])[0] != "allow":
            return RedirectResponse(self._provider.deny(pending), status_code=303)
        ticked = set(fields.get("scope", []))
        # Only what was requested, ticked, and the key may grant (never an escalation).
        chosen = [s for s in pending.params["scopes"] if s in ticked and s in pending.allowed]
        if not chosen:
            return self._consent_page(pending, "Tick at least one permission, or deny.")
        return RedirectResponse(self._provider.approve(pending, chosen), status_code=303)
