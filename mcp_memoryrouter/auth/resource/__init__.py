"""The resource-server side of /mcp: who is calling (memory keys, access tokens of the
embedded or an external authorization server) and the HTTP answer when they may not.

The entry is :func:`protect`: /mcp behind bearer authentication and the scope challenge,
with the protected-resource metadata (RFC 9728) when an authorization server is named. It
never imports the authorization server: that server's token check is handed in as a
``TokenVerifier``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from mcp.server.auth.provider import AccessToken, TokenVerifier
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import BaseRoute
from starlette.types import ASGIApp

from mcp_memoryrouter.auth.metadata import resource_metadata_url, resource_routes
from mcp_memoryrouter.auth.resource.challenge import (
    RECONNECT,
    ScopeChallenge,
    SingleAuthorization,
    refuse_scope,
)
from mcp_memoryrouter.auth.resource.external import (
    ExternalTokenVerifier,
    RemoteKeys,
    load_bindings,
)
from mcp_memoryrouter.auth.resource.memory_keys import (
    MemoryKeyVerifier,
    admitted_or_none,
    key_info_or_none,
)
from mcp_memoryrouter.auth.scopes import FIRST_CONNECTION_SCOPES
from mcp_memoryrouter.client import VaultClient

__all__ = [
    "RECONNECT",
    "ExternalIssuer",
    "Protected",
    "admitted_or_none",
    "key_info_or_none",
    "protect",
    "refuse_scope",
]


@dataclass(frozen=True)
class ExternalIssuer:
    """An operator's own authorization server (``MEMORYROUTER_OAUTH=external``): its JWT
    access tokens are accepted, each bound to a vault through the bindings file."""

    issuer: str
    jwks_url: str
    audience: str
    vault_claim: str
    bindings_file: Path


@dataclass
class Protected:
    """/mcp behind its authentication, the discovery routes that come with it, and what to
    close when the server stops."""

    endpoint: ASGIApp
    routes: list[BaseRoute] = field(default_factory=list)
    closing: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


class AnyOfVerifiers:
    """The first verifier that accepts the token wins (memory keys, then JWTs)."""

    def __init__(self, *verifiers: TokenVerifier) -> None:
        self._verifiers = verifiers

    async def verify_token(self, token: str) -> AccessToken | None:
        for verifier in self._verifiers:
            found = await verifier.verify_token(token)
            if found is not None:
                return found
        return None


def protect(
    endpoint: ASGIApp,
    vault: VaultClient,
    *,
    resource: str,
    clock: Callable[[], float],
    tokens: TokenVerifier | None = None,
    issuers: Sequence[str] = (),
    external: ExternalIssuer | None = None,
) -> Protected:
    """``endpoint`` (the public URL ``resource``) behind bearer authentication: memory keys,
    the access tokens ``tokens`` verifies (the embedded authorization server, one of
    ``issuers``), or those of ``external``; with an issuer, the resource metadata naming it."""
    verifiers: list[TokenVerifier] = [MemoryKeyVerifier(vault)]
    closing: list[Callable[[], Awaitable[None]]] = []
    issuers = list(issuers)
    if tokens is not None:
        verifiers.append(tokens)
    if external is not None:
        verifier = external_verifier(external, clock)
        verifiers.append(verifier)
        closing.append(verifier.aclose)
        issuers.append(external.issuer)
    metadata_url = resource_metadata_url(resource) if issuers else None
    routes: list[BaseRoute] = []
    if issuers:
        routes += resource_routes(resource, issuers, FIRST_CONNECTION_SCOPES)
    guarded = SingleAuthorization(
        AuthenticationMiddleware(
            AuthContextMiddleware(ScopeChallenge(endpoint, metadata_url)),
            backend=BearerAuthBackend(AnyOfVerifiers(*verifiers)),
        )
    )
    return Protected(guarded, routes, closing)


def external_verifier(
    external: ExternalIssuer, clock: Callable[[], float]
) -> ExternalTokenVerifier:
    return ExternalTokenVerifier(
        RemoteKeys(httpx2.AsyncClient(), external.jwks_url, clock=clock),
        bindings=load_bindings(external.bindings_file),
        issuer=external.issuer,
        audience=external.audience,
        vault_claim=external.vault_claim,
        clock=clock,
    )
