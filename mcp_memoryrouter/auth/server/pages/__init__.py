"""The sign-in and consent pages of the embedded authorization server.

Server-rendered, no JavaScript, in the explorer's page shell; they cannot be framed
(``frame-ancestors 'none'``, ``X-Frame-Options: DENY``). One pending request (``flow``)
goes through two steps: signing in (``signin``: a memory key, or an identity provider) and
consent (``consent``). Their HTML is pure (``html``, ``consent_form``).
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp.server.auth.handlers.authorize import AuthorizationHandler
from starlette.routing import Route

from mcp_memoryrouter.auth.explorer_signin import ExplorerIdentity
from mcp_memoryrouter.auth.scopes import Scope
from mcp_memoryrouter.auth.server.pages.consent import Consent
from mcp_memoryrouter.auth.server.pages.flow import Endpoint, Flow
from mcp_memoryrouter.auth.server.pages.html import (
    CONSENT_PATH,
    OIDC_CALLBACK_PATH,
    OIDC_START_PATH,
    IdentityProvider,
    stylesheet,
)
from mcp_memoryrouter.auth.server.pages.signin import ExplorerSignedIn, SignIn
from mcp_memoryrouter.auth.server.provider import SIGN_IN_PATH, EmbeddedProvider
from mcp_memoryrouter.client import VaultClient

__all__ = ["OIDC_CALLBACK_PATH", "IdentityProvider", "Pages", "stylesheet"]


class Pages:
    """The pages of one authorization server: ``identity_providers`` sign people in instead
    of a memory key (``MEMORYROUTER_SIGNIN=oidc``), and a sign-in made for the explorer ends
    in ``explorer_signed_in``."""

    def __init__(
        self,
        provider: EmbeddedProvider,
        vault: VaultClient,
        descriptions: dict[Scope, str],
        server_name: str,
        identity_providers: Sequence[IdentityProvider] = (),
        explorer_signed_in: ExplorerSignedIn | None = None,
    ) -> None:
        self._flow = Flow(provider, vault, server_name, identity_providers)
        self._sign_in = SignIn(self._flow, explorer_signed_in)
        self._consent = Consent(self._flow, descriptions)

    def authorize(self, handler: AuthorizationHandler) -> Endpoint:
        """/authorize: the SDK's handler, its pending request handed to the pages."""
        return self._flow.authorize(handler)

    def explorer_identity(self) -> ExplorerIdentity | None:
        return self._sign_in.explorer_identity()

    def routes(self) -> list[Route]:
        """Every page and form, forms refusing a post from another site."""
        same_site, sign_in, consent = self._flow.same_site, self._sign_in, self._consent
        return [
            Route(SIGN_IN_PATH, endpoint=sign_in.page, methods=["GET"]),
            Route(SIGN_IN_PATH, endpoint=same_site(sign_in.post), methods=["POST"]),
            Route(OIDC_START_PATH, endpoint=same_site(sign_in.oidc_start), methods=["POST"]),
            Route(OIDC_CALLBACK_PATH, endpoint=sign_in.oidc_callback, methods=["GET"]),
            Route(CONSENT_PATH, endpoint=consent.page, methods=["GET"]),
            Route(CONSENT_PATH, endpoint=same_site(consent.post), methods=["POST"]),
        ]
