"""The embedded authorization server's provider for the MCP SDK's OAuth handlers.

The SDK handlers parse requests, authenticate clients and check PKCE S256 (RFC 7636 §4.6);
this provider keeps the state and the rules: every client registered with all scopes (so a
step-up is not refused at /authorize), the ``resource`` bound into the audience (RFC 8707),
codes used once (a replay revokes the grant, RFC 6749 §4.1.2), refresh tokens rotated with
reuse detection (a reuse revokes the family, OAuth 2.1 §4.3.1), and a refresh refused once
the vault no longer accepts the grant's memory key (the key was revoked).

A pending authorization request is known by the digest of a secret only its browser holds:
``authorize`` hands the secret to the pages in the sign-in URL's ``flow`` parameter, which
they move into an HttpOnly cookie before the browser ever sees the URL.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    IdentityAssertionParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl

from mcp_memoryrouter.auth.scopes import FIRST_CONNECTION_SCOPES
from mcp_memoryrouter.auth.server.clients import (
    UNUSED_CLIENT_SECONDS,
    MetadataDocuments,
    RegisteredClient,
    check_registration,
    full_client,
    is_metadata_url,
)
from mcp_memoryrouter.auth.server.grants import GrantTokenVerifier, key_still_accepted
from mcp_memoryrouter.auth.server.signing import GRANT_CLAIM, TokenKeys
from mcp_memoryrouter.auth.state.database import off_loop
from mcp_memoryrouter.auth.state.sealing import SealedElsewhere, Sealer
from mcp_memoryrouter.auth.state.store import (
    AuthStore,
    Grant,
    Issued,
    PendingRequest,
    Spent,
    digest,
)
from mcp_memoryrouter.client import VaultClient

CODE_SECONDS = 60
REQUEST_SECONDS = 600  # time to sign in and consent
SIGN_IN_PATH = "/oauth/sign-in"
FLOW_PARAM = "flow"  # the pending request's secret, from authorize() to the pages only
# RFC 7636 §4.2: code_challenge = 43*128unreserved (an S256 challenge is always 43 of them)
CODE_CHALLENGE = re.compile(r"[A-Za-z0-9\-._~]{43,128}")


class GrantCode(AuthorizationCode):
    grant_id: str


T = TypeVar("T")


class GrantRefreshToken(RefreshToken):
    grant_id: str


def canonical_resource(uri: str) -> str:
    """Lower-case scheme and host, no trailing slash (MCP authorization, canonical URI)."""
    parts = urlsplit(uri)
    return urlunsplit(
        (parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), parts.query, "")
    )


def resource_problem(requested: str, own: str) -> str | None:
    """Why a ``resource`` parameter does not name this server's resource ``own``, or None."""
    if "#" in requested:  # RFC 8707 §2: MUST NOT include a fragment (an empty one included)
        return "resource must not have a fragment: name the MCP server's URL without '#'"
    if canonical_resource(requested) != canonical_resource(own):
        return "this server only issues tokens for itself"
    return None


@dataclass(frozen=True)
class Lifetimes:
    access_seconds: int = 900
    refresh_seconds: int = 30 * 86_400


class EmbeddedProvider:
    def __init__(
        self,
        store: AuthStore,
        signer: TokenKeys,
        sealer: Sealer,
        documents: MetadataDocuments,
        verifier: GrantTokenVerifier,
        vault: VaultClient,
        *,
        lifetimes: Lifetimes = Lifetimes(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self._signer = signer
        self._sealer = sealer
        self._documents = documents
        self._verifier = verifier
        self._vault = vault
        self.issuer = verifier.issuer
        self.resource = verifier.resource
        self._lifetimes = lifetimes
        self.clock = clock

    async def _db(self, work: Callable[[], T]) -> T:
        """The store's ``work``, off the event loop when the store is remote."""
        return await off_loop(self.store.remote, work)

    # clients (RFC 7591, client ID metadata documents) -------------------------------------

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if is_metadata_url(client_id):
            return await self._documents.fetch(client_id)
        info = await self._db(partial(self.store.client, client_id))
        return None if info is None else full_client(info)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        check_registration(client_info, [str(uri) for uri in client_info.redirect_uris or []])
        # Refresh tokens are always issued, so the response says so (ChatGPT refuses one whose
        # grant_types lacks refresh_token while the metadata advertises it).
        client_info.grant_types = list(dict.fromkeys([*client_info.grant_types, "refresh_token"]))
        info = full_client(client_info.model_dump(mode="json", exclude_none=True))
        now = self.clock()

        def save() -> None:
            self.store.forget_unused_clients(now - UNUSED_CLIENT_SECONDS)  # sweep on write
            self.store.save_client(info.client_id or "", info.model_dump(mode="json"), now)

        await self._db(save)
        client_info.scope = info.scope  # the registration response shows every scope

    # authorization ------------------------------------------------------------------------

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        if not CODE_CHALLENGE.fullmatch(params.code_challenge):
            raise AuthorizeError(
                "invalid_request",
                "code_challenge must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~ "
                "(the S256 of the code_verifier, base64url without padding)",
            )
        problem = resource_problem(params.resource, self.resource) if params.resource else None
        if problem:
            raise AuthorizeError("invalid_target", problem)
        resource = self.resource
        now = self.clock()
        flow = secrets.token_urlsafe(32)
        request = PendingRequest(
            id=digest(flow),
            client_id=client.client_id or "",
            params={
                "client_name": client.client_name,
                "scopes": params.scopes or list(FIRST_CONNECTION_SCOPES),
                "state": params.state,
                "code_challenge": params.code_challenge,
                "redirect_uri": str(params.redirect_uri),
                "explicit": params.redirect_uri_provided_explicitly,
                "resource": resource,
            },
            csrf=secrets.token_urlsafe(32),
            sealed_key=None,
            vault_ref=None,
            allowed=[],
            expires_at=now + REQUEST_SECONDS,
        )

        def save() -> None:
            self.store.sweep(now)
            self.store.save_request(request)

        await self._db(save)
        return f"{self.issuer}{SIGN_IN_PATH}?{FLOW_PARAM}={flow}"

    def approve(self, request: PendingRequest, scopes: list[str]) -> str:
        """The consent was given: create the grant and its code; the client's redirect."""
        assert request.sealed_key is not None and request.vault_ref is not None
        now = self.clock()
        grant = Grant(
            id=secrets.token_urlsafe(16),
            client_id=request.client_id,
            vault_ref=request.vault_ref,
            sealed_key=request.sealed_key,
            scopes=scopes,
            resource=request.params["resource"],
            revoked=False,
        )
        self.store.save_grant(grant, now)
        code = secrets.token_urlsafe(32)
        self.store.save_code(
            code,
            grant.id,
            request.params["redirect_uri"],
            request.params["explicit"],
            request.params["code_challenge"],
            now + CODE_SECONDS,
        )
        self.store.delete_request(request.id, now)
        return self.redirect(request, code=code)

    def deny(self, request: PendingRequest) -> str:
        self.store.delete_request(request.id, self.clock())
        return self.redirect(request, error="access_denied")

    def redirect(self, request: PendingRequest, **params: str) -> str:
        # RFC 9207: iss in every authorization response
        return construct_redirect_uri(
            request.params["redirect_uri"], **params, state=request.params["state"], iss=self.issuer
        )

    def seal(self, key: str) -> str:
        return self._sealer.seal(key)

    def unseal(self, sealed: str) -> str | None:
        return self._sealer.unseal(sealed)

    # codes and tokens ---------------------------------------------------------------------

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> GrantCode | None:
        return await self._db(partial(self._load_code, client, authorization_code))

    def _load_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> GrantCode | None:
        row = self.store.code(authorization_code)
        if row is None or row.grant.client_id != client.client_id:
            return None
        if row.used:
            self.store.revoke_grant(row.grant.id)  # a replayed code revokes what it issued
            return None
        if row.grant.revoked:
            return None
        return GrantCode(
            code=authorization_code,
            scopes=row.grant.scopes,
            expires_at=row.expires_at,
            client_id=row.grant.client_id,
            code_challenge=row.code_challenge,
            redirect_uri=AnyUrl(row.redirect_uri),
            redirect_uri_provided_explicitly=row.explicit,
            resource=row.grant.resource,
            subject=row.grant.vault_ref,
            grant_id=row.grant.id,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: GrantCode
    ) -> OAuthToken:
        return await self._db(partial(self._exchange_code, authorization_code))

    def _exchange_code(self, authorization_code: GrantCode) -> OAuthToken:
        grant = self.store.grant(authorization_code.grant_id)
        assert grant is not None
        return self._issue(grant, grant.scopes, ("code", authorization_code.code))

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> GrantRefreshToken | None:
        return await self._db(partial(self._load_refresh, client, refresh_token))

    def _load_refresh(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> GrantRefreshToken | None:
        row = self.store.refresh(refresh_token)
        if row is None or row.grant.client_id != client.client_id:
            return None
        if row.used:
            self.store.revoke_grant(row.grant.id)  # reuse of a rotated token: revoke the family
            return None
        if row.grant.revoked or row.expires_at <= self.clock():
            return None
        return GrantRefreshToken(
            token=refresh_token,
            client_id=row.grant.client_id,
            scopes=row.scopes,
            expires_at=int(row.expires_at),
            resource=row.grant.resource,
            subject=row.grant.vault_ref,
            grant_id=row.grant.id,
        )

    async def exchange_refresh_token(
        self,
        client: OAuthClientInformationFull,
        refresh_token: GrantRefreshToken,
        scopes: list[str],
    ) -> OAuthToken:
        grant, key = await self._db(partial(self._refreshed_grant, refresh_token))
        if not await key_still_accepted(self._vault, key):
            await self._db(partial(self.store.revoke_grant, grant.id))
            raise TokenError(
                "invalid_grant",
                "the memory key this connection was made with was revoked",
            )
        granted = [s for s in scopes if s in grant.scopes]
        spent: tuple[Spent, str] = ("refresh", refresh_token.token)
        return await self._db(partial(self._issue, grant, granted, spent))

    def _refreshed_grant(self, refresh_token: GrantRefreshToken) -> tuple[Grant, str]:
        """The grant and its memory key (the token is spent when the new ones are kept)."""
        grant = self.store.grant(refresh_token.grant_id)
        assert grant is not None
        key = self._sealer.unseal(grant.sealed_key)
        if key is None:  # before anything is spent or revoked: the replicas' keys differ
            raise SealedElsewhere
        return grant, key

    def _issue(self, grant: Grant, scopes: list[str], spent: tuple[Spent, str]) -> OAuthToken:
        """New tokens for ``grant``, the code or refresh token ``spent`` for them in the same
        transaction as the new refresh token is kept; a secret spent already is a reuse,
        and revokes the grant (the whole refresh-token family)."""
        now = int(self.clock())
        access = self._signer.sign(
            {
                "iss": self.issuer,
                "sub": grant.vault_ref,
                "aud": grant.resource,
                "client_id": grant.client_id,
                "scope": " ".join(scopes),
                "iat": now,
                "exp": now + self._lifetimes.access_seconds,
                "jti": secrets.token_urlsafe(16),
                GRANT_CLAIM: grant.id,
            }
        )
        refresh = secrets.token_urlsafe(32)
        issued = Issued(refresh, grant.id, grant.scopes, now + self._lifetimes.refresh_seconds, now)
        if not self.store.spend_for(*spent, issued):
            self.store.revoke_grant(grant.id)
            what = "authorization code" if spent[0] == "code" else "refresh token"
            raise TokenError("invalid_grant", f"{what} already used")
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=self._lifetimes.access_seconds,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: IdentityAssertionParams
    ) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "identity assertions are not accepted")

    async def load_access_token(self, token: str) -> AccessToken | None:
        return await self._verifier.verify_token(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        """RFC 7009: revoking either token revokes the grant, and so every token from it."""
        if isinstance(token, GrantRefreshToken):
            await self._db(partial(self.store.revoke_grant, token.grant_id))
        elif isinstance(token, AccessToken) and token.claims:
            await self._db(partial(self.store.revoke_grant, str(token.claims[GRANT_CLAIM])))


__all__ = [
    "EmbeddedProvider",
    "Lifetimes",
    "RegisteredClient",
    "canonical_resource",
    "resource_problem",
]
