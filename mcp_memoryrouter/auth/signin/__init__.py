"""Sign-in with an identity provider (OpenID Connect): this server as a relying party.

The entry is :class:`OidcProvider`, one provider as the settings name it; the authorization
server makes its relying party (:meth:`OidcProvider.relying_party`) and offers it on its
sign-in page and, through that page, to the explorer."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import httpx2

from mcp_memoryrouter.auth.signin.oidc import (
    Identity,
    OidcClient,
    OidcRefused,
    OidcSettings,
    admitted,
)

__all__ = ["Identity", "OidcClient", "OidcProvider", "OidcRefused", "admitted"]


@dataclass(frozen=True)
class OidcProvider:
    """One OpenID Provider people sign in with, and who it admits."""

    issuer: str
    client_id: str
    client_secret: str
    name: str | None = None
    scopes: str = "openid email profile"
    allowed_domains: tuple[str, ...] = ()
    allowed_emails: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """Which provider a sign-in went to, named in its state: the same on every replica."""
        return hashlib.sha256(f"{self.issuer}\0{self.client_id}".encode()).hexdigest()[:8]

    @property
    def shown_name(self) -> str:
        """What the sign-in button calls it: its name, else its issuer's host."""
        return self.name or httpx2.URL(self.issuer).host

    def relying_party(self, redirect_uri: str, timeout: float) -> OidcClient:
        """The relying party for this provider, coming back to ``redirect_uri``; each call to
        the provider may take ``timeout`` seconds."""
        settings = OidcSettings(
            issuer=self.issuer,
            client_id=self.client_id,
            client_secret=self.client_secret,
            redirect_uri=redirect_uri,
            scopes=self.scopes,
        )
        return OidcClient(settings, httpx2.AsyncClient(timeout=timeout))
