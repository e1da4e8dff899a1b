"""Consent: the scopes the app asked for, in words, each ticked; the person allows some,
denies, or signs in with another key. The key is checked with the vault again when consent
is given, and nothing is granted that was not asked for, ticked, and the key may do."""

from __future__ import annotations

from functools import partial

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcp_memoryrouter.auth.display import return_host, shown
from mcp_memoryrouter.auth.scopes import Scope
from mcp_memoryrouter.auth.server.pages.consent_form import answers, asked, news
from mcp_memoryrouter.auth.server.pages.flow import Flow
from mcp_memoryrouter.auth.server.pages.html import (
    CONSENT_PATH,
    UNREACHABLE,
    client_words,
    consent_lead,
    error_text,
    refused,
)
from mcp_memoryrouter.auth.server.provider import SIGN_IN_PATH
from mcp_memoryrouter.auth.state.store import PendingRequest
from mcp_memoryrouter.errors import MemoryRouterError


class Consent:
    """The consent step of a pending request signed in with a key; ``descriptions`` say
    what each scope lets an app do."""

    def __init__(self, flow: Flow, descriptions: dict[Scope, str]) -> None:
        self._flow = flow
        self._descriptions = descriptions

    async def page(self, request: Request) -> Response:
        pending = await self._flow.pending(request)
        if pending is None:
            return self._flow.expired()
        if pending.sealed_key is None:
            return RedirectResponse(SIGN_IN_PATH, status_code=303)
        return await self._page(pending)

    async def _page(self, pending: PendingRequest, message: str | None = None) -> Response:
        """What the app asks for, in words, every scope it asked for ticked; at a step-up
        (this app holds a grant in this vault already) what it asks for anew is named."""
        flow = self._flow
        before = await flow.db(
            partial(flow.store.granted, pending.client_id, pending.vault_ref or "")
        )
        scopes = asked(pending.params["scopes"], pending.allowed, before, self._descriptions)
        step_up = any(one.new for one in scopes)
        lead = consent_lead(pending, flow.server, step_up=step_up)
        form = answers(
            CONSENT_PATH,
            pending.csrf,
            scopes,
            shown(return_host(pending.params["redirect_uri"])),
            shown(pending.client_id),
        )
        body = f"{news(client_words(pending), scopes)}{lead}{error_text(message)}{form}"
        title = "Allow more access?" if step_up else "Allow access?"
        return flow.page(title, body, 200 if message is None else 400)

    async def post(self, request: Request) -> Response:
        flow = self._flow
        pending, fields = await flow.form(request)
        if pending is None or pending.sealed_key is None:
            return refused()
        decision = (fields.get("decision") or [""])[0]
        if decision == "switch":
            await flow.signed_out(request, pending)
            back = RedirectResponse(SIGN_IN_PATH, status_code=303)
            flow.cookies.clear_session(back)
            return back
        if decision != "allow":
            return self._finish(await flow.db(partial(flow.provider.deny, pending)))
        ticked = set(fields.get("scope", []))
        # Only what was requested, ticked, and the key may grant (never an escalation).
        chosen = [s for s in pending.params["scopes"] if s in ticked and s in pending.allowed]
        if not chosen:
            return await self._page(pending, "Tick at least one permission, or deny.")
        info = await flow.check(flow.provider.unseal(pending.sealed_key))
        if isinstance(info, MemoryRouterError):
            return await self._page(pending, UNREACHABLE)
        if info is None or info.vault != pending.vault_ref:
            response = flow.sign_in_page(
                await flow.signed_out(request, pending),
                "That memory key has been revoked. Sign in with another key of the vault.",
            )
            flow.cookies.clear_session(response)
            return response
        return self._finish(await flow.db(partial(flow.provider.approve, pending, chosen)))

    def _finish(self, location: str) -> Response:
        """Back to the client; the pending request is gone, and so is its cookie."""
        response = RedirectResponse(location, status_code=303)
        self._flow.cookies.clear_flow(response)
        return response
