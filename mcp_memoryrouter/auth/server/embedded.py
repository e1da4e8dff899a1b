"""The embedded authorization server, assembled: state, keys, the SDK's OAuth endpoints with
our provider, discovery documents and the sign-in and consent pages.

The entry is :func:`embedded_server`: the composition root hands it the shared state, the
vault, the policy and its settings, and gets the server's routes, the verifier of its
tokens (for /mcp) and what the explorer signs in through."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx2
from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import ClientAuthenticator
from mcp.server.auth.routes import cors_middleware
from mcp.server.auth.settings import ClientRegistrationOptions
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp_memoryrouter.auth.explorer_signin import ExplorerIdentity, IdentitySignedIn
from mcp_memoryrouter.auth.metadata import authorization_server_metadata, json_route
from mcp_memoryrouter.auth.resource import RECONNECT
from mcp_memoryrouter.auth.scopes import ALL_SCOPES, ScopePolicy
from mcp_memoryrouter.auth.server.addresses import Resolver, system_resolver
from mcp_memoryrouter.auth.server.clients import (
    DocumentFetching,
    MetadataDocuments,
)
from mcp_memoryrouter.auth.server.grants import GrantTokenVerifier
from mcp_memoryrouter.auth.server.pages import (
    OIDC_CALLBACK_PATH,
    IdentityProvider,
    Pages,
    stylesheet,
)
from mcp_memoryrouter.auth.server.provider import (
    EmbeddedProvider,
    Lifetimes,
    resource_problem,
)
from mcp_memoryrouter.auth.server.revocation import RevocationEndpoint
from mcp_memoryrouter.auth.server.signing import Signer
from mcp_memoryrouter.auth.server.signing_keys import SigningKeys
from mcp_memoryrouter.auth.server.throttle import OAuthLimits, Throttle, throttled
from mcp_memoryrouter.auth.signin import Identity, OidcProvider
from mcp_memoryrouter.auth.state import State
from mcp_memoryrouter.auth.state.sealing import Sealer
from mcp_memoryrouter.auth.state.store import AUTH_DB_FILE, AuthStore
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.edge.addresses import is_loopback
from mcp_memoryrouter.pages.assets import STYLESHEET_PATH

__all__ = [
    "PUBLIC_CORS_PREFIXES",
    "DocumentFetching",
    "EmbeddedAuthServer",
    "OAuthLimits",
    "build_embedded",
    "embedded_server",
]

# Paths answered with "Access-Control-Allow-Origin: *" (browser-based clients discover and
# exchange tokens cross-origin); the app's own CORS policy must not shadow them.
PUBLIC_CORS_PREFIXES = ("/.well-known/", "/token", "/register", "/revoke", "/jwks.json")
OIDC_TIMEOUT = 10.0  # seconds a call to the identity provider may take


@dataclass
class EmbeddedAuthServer:
    issuer: str
    provider: EmbeddedProvider
    verifier: GrantTokenVerifier
    signer: Signer | SigningKeys
    store: AuthStore
    routes: list[Route]
    _http: httpx2.AsyncClient
    identity_providers: tuple[IdentityProvider, ...] = ()
    pages: Pages | None = None  # the sign-in pages (the explorer signs in through them too)

    @property
    def explorer_identity(self) -> ExplorerIdentity | None:
        """The sign-in the explorer offers through this server's identity providers (None
        when people sign in with a memory key)."""
        return None if self.pages is None else self.pages.explorer_identity()

    async def aclose(self) -> None:
        await self._http.aclose()
        for identity_provider in self.identity_providers:
            await identity_provider.client.aclose()
        self.store.close()


def embedded_server(
    state: State,
    vault: VaultClient,
    policy: ScopePolicy,
    *,
    issuer: str,
    server_name: str,
    clock: Callable[[], float],
    access_seconds: int,
    refresh_seconds: int,
    signing_seconds: int,
    limits: OAuthLimits,
    documents: DocumentFetching | None = None,
    sign_in: Sequence[OidcProvider] = (),
    provision: Callable[[Identity], Awaitable[str]] | None = None,
    explorer_signed_in: Callable[[IdentitySignedIn], Awaitable[Response]] | None = None,
) -> EmbeddedAuthServer:
    """The authorization server of /mcp at ``issuer``, its state in ``state`` (on PostgreSQL,
    replicas share it and its signing keys). People sign in with a memory key, or with one
    of ``sign_in`` (each first sign-in gets a vault's key from ``provision``); a sign-in
    made for the explorer ends in ``explorer_signed_in``. ``documents``: how client ID
    metadata documents are fetched (default: from the internet)."""
    store, signer = None, None
    if state.pool is not None:  # replicas share the state and the signing keys
        store = AuthStore.postgres(state.pool)
        signer = SigningKeys.postgres(
            state.pool,
            state.sealer,
            signing_seconds=signing_seconds,
            access_seconds=access_seconds,
            clock=clock,
        )
    fetching = documents or DocumentFetching(httpx2.AsyncClient())
    return build_embedded(
        state.data_dir,
        issuer=issuer,
        resource=issuer + "/mcp",
        vault=vault,
        policy=policy,
        lifetimes=Lifetimes(access_seconds, refresh_seconds),
        limits=limits,
        clock=clock,
        server_name=server_name,
        sealer=state.sealer,
        store=store,
        signer=signer,
        identity_providers=identity_providers(issuer, sign_in, provision),
        http=fetching.http,
        resolver=fetching.resolver,
        explorer_signed_in=explorer_signed_in,
    )


def identity_providers(
    issuer: str,
    sign_in: Sequence[OidcProvider],
    provision: Callable[[Identity], Awaitable[str]] | None,
) -> list[IdentityProvider]:
    """What the sign-in page offers for each of ``sign_in``: its relying party, coming back
    to this server's callback."""
    if not sign_in:
        return []
    if provision is None:
        raise ValueError("signing in with an identity provider needs a way to make vaults")
    return [
        IdentityProvider(
            client=one.relying_party(issuer + OIDC_CALLBACK_PATH, OIDC_TIMEOUT),
            name=one.shown_name,
            provision=provision,
            allowed_domains=one.allowed_domains,
            allowed_emails=one.allowed_emails,
            key=one.key,
        )
        for one in sign_in
    ]


def token_endpoint(
    handler: TokenHandler, resource: str
) -> Callable[[Request], Awaitable[Response]]:
    """The SDK's token endpoint, refusing a request that names another resource."""

    async def token(request: Request) -> Response:
        # RFC 8707 §2.2: a token request may name only the resource the grant is for
        form = await request.form()  # cached for the SDK handler
        requested = form.get("resource")
        problem = resource_problem(requested, resource) if isinstance(requested, str) else None
        if requested and problem:
            body = {"error": "invalid_target", "error_description": problem}
            return JSONResponse(body, status_code=400, headers={"Cache-Control": "no-store"})
        answer: Response = await handler.handle(request)
        if form.get("grant_type") == "refresh_token":
            return reconnect_on_refusal(answer)
        return answer

    return token


def reconnect_on_refusal(answer: Response) -> Response:
    """A refused refresh (``invalid_grant``: unknown, expired, reused, or its memory key
    revoked) says where the person reconnects: Claude does not sign in again by itself, and
    shows the reason."""
    if answer.status_code != 400:
        return answer
    try:
        body = json.loads(bytes(answer.body))
    except ValueError:
        return answer
    if not isinstance(body, dict) or body.get("error") != "invalid_grant":
        return answer
    body["error_description"] = f"{body.get('error_description') or 'refused'}: {RECONNECT}"
    headers = {"Cache-Control": "no-store", "Pragma": "no-cache"}
    return JSONResponse(body, status_code=400, headers=headers)


def build_embedded(
    data_dir: Path,
    *,
    issuer: str,
    resource: str,
    vault: VaultClient,
    policy: ScopePolicy,
    lifetimes: Lifetimes = Lifetimes(),
    clock: Callable[[], float] = time.time,
    http: httpx2.AsyncClient | None = None,
    resolver: Resolver = system_resolver,
    limits: OAuthLimits | None = None,
    server_name: str | None = None,
    sealer: Sealer | None = None,
    store: AuthStore | None = None,
    signer: Signer | SigningKeys | None = None,
    identity_providers: Sequence[IdentityProvider] = (),
    explorer_signed_in: Callable[[IdentitySignedIn], Awaitable[Response]] | None = None,
) -> EmbeddedAuthServer:
    """``server_name`` is what the pages call this server (default: the issuer's host). The
    sealing key, the state and the signing keys default to files in ``data_dir``; replicas
    pass a shared sealing key and state and keys in PostgreSQL. Client ID metadata documents
    are fetched with ``http`` from an address ``resolver`` names."""
    sealer = sealer or Sealer.in_dir(data_dir)
    store = store or AuthStore.sqlite(data_dir / AUTH_DB_FILE)
    signer = signer or Signer.in_dir(data_dir)
    http = http or httpx2.AsyncClient()
    documents = MetadataDocuments(
        http,
        allow_loopback=is_loopback(httpx2.URL(issuer).host),
        clock=clock,
        resolver=resolver,
    )
    verifier = GrantTokenVerifier(
        signer, store, sealer, vault, issuer=issuer, resource=resource, clock=clock
    )
    provider = EmbeddedProvider(
        store, signer, sealer, documents, verifier, vault, lifetimes=lifetimes, clock=clock
    )
    name = server_name or httpx2.URL(issuer).host
    pages = Pages(
        provider, vault, policy.descriptions, name, identity_providers, explorer_signed_in
    )
    authenticator = ClientAuthenticator(provider)
    registration = ClientRegistrationOptions(
        enabled=True, valid_scopes=list(ALL_SCOPES), default_scopes=list(ALL_SCOPES)
    )
    metadata = authorization_server_metadata(issuer, ALL_SCOPES)
    token = token_endpoint(TokenHandler(provider, authenticator), resource)

    async def jwks(_: Request) -> JSONResponse:
        return JSONResponse(signer.jwks(), headers={"Cache-Control": "public, max-age=600"})

    post = ["POST", "OPTIONS"]
    routes = [
        json_route("/.well-known/oauth-authorization-server", metadata),
        json_route("/.well-known/openid-configuration", metadata),  # the alias clients probe
        Route("/jwks.json", endpoint=cors_middleware(jwks, ["GET", "OPTIONS"]), methods=["GET"]),
        Route(
            "/authorize",
            endpoint=pages.authorize(AuthorizationHandler(provider)),
            methods=["GET", "POST"],
        ),
        Route(
            "/token",
            endpoint=cors_middleware(token, post),
            methods=post,
        ),
        Route(
            "/register",
            endpoint=cors_middleware(RegistrationHandler(provider, registration).handle, post),
            methods=post,
        ),
        Route(
            "/revoke",
            endpoint=cors_middleware(RevocationEndpoint(provider, authenticator).handle, post),
            methods=post,
        ),
        *pages.routes(),
    ]
    routes = throttled(routes, Throttle(limits, lambda: int(clock() * 1000)))
    routes.append(Route(STYLESHEET_PATH, endpoint=stylesheet, methods=["GET"]))  # not limited
    return EmbeddedAuthServer(
        issuer, provider, verifier, signer, store, routes, http, tuple(identity_providers), pages
    )
