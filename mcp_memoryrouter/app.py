"""Composition root of the server: the vault at /v1, the MCP endpoint at /mcp.

With OAuth on (the default) the same origin is also the authorization server: discovery
documents, /authorize, /token, /register, /revoke, /jwks.json and the sign-in and consent
pages. /mcp accepts memory keys and the access tokens that server issues (or, with
``MEMORYROUTER_OAUTH=external``, those of the operator's own identity provider).

Embedded mode: the MCP side calls the vault app in-process through an ASGI transport, so it
runs the same client code as against a remote API. With ``MEMORYROUTER_API_URL`` set there
is no local vault: /mcp proxies to that API over the network.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx2
from fastapi import FastAPI
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_memoryrouter import limits
from mcp_memoryrouter.auth.explorer_signin import IdentitySignedIn
from mcp_memoryrouter.auth.resource import ExternalIssuer, Protected, protect
from mcp_memoryrouter.auth.scopes import ScopePolicy, load_policy
from mcp_memoryrouter.auth.server.embedded import (
    PUBLIC_CORS_PREFIXES,
    DocumentFetching,
    EmbeddedAuthServer,
    OAuthLimits,
    embedded_server,
)
from mcp_memoryrouter.auth.signin import Identity, OidcProvider
from mcp_memoryrouter.auth.state import State
from mcp_memoryrouter.auth.state import request_state_key as sealed_state_key
from mcp_memoryrouter.auth.state.database import AUTH_MIGRATIONS, Database, PostgresPool
from mcp_memoryrouter.auth.state.store import AUTH_DB_FILE
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.config import OidcProviderSettings, Settings
from mcp_memoryrouter.edge.addresses import LOOPBACK_HOSTS, is_loopback
from mcp_memoryrouter.edge.cors import cross_origin
from mcp_memoryrouter.edge.forwarding import LocalOnly
from mcp_memoryrouter.edge.ratelimit import TokenBuckets
from mcp_memoryrouter.errors import ConfigError
from mcp_memoryrouter.mcp_server.binding import Binder
from mcp_memoryrouter.mcp_server.budget import ResultBudget
from mcp_memoryrouter.mcp_server.server import build_server
from mcp_memoryrouter.metrics import Metrics
from mcp_memoryrouter.private import open_private, private_dir, private_file, writable_data_dir
from mcp_memoryrouter.proxy.relay import ChatProxy, Upstreams
from mcp_memoryrouter.reflector.provider import Provider, ProviderModel, key_from_file
from mcp_memoryrouter.reflector.runs import ServerReflector, Timing
from mcp_memoryrouter.ui.explorer import Explorer
from mcp_memoryrouter.ui.sessions import MIGRATIONS as UI_MIGRATIONS
from mcp_memoryrouter.ui.sessions import UI_DB_FILE, UiSessions
from mcp_memoryrouter.vault.app import (
    build_service,
    create_vault_app,
    front_of,
    in_process,
    monotonic_clock,
)
from mcp_memoryrouter.vault.service import VaultService

INTERNAL_URL = "http://vault.internal"
# A tool call rides out a 429 that asks for at most this many seconds; a longer wait is a
# rate_limited tool error at once (the host is waiting, and the model can say when to retry).
MCP_LONGEST_WAIT = 2.0


@dataclass
class Server:
    """The assembled server and the parts the CLI needs: ``service`` is the vault this
    process serves, None when it proxies to another (``MEMORYROUTER_API_URL``)."""

    app: ASGIApp
    client: VaultClient
    service: VaultService | None
    oauth: EmbeddedAuthServer | None = None


def vault_client(settings: Settings, vault_app: FastAPI | None) -> VaultClient:
    if vault_app is None:
        assert settings.api_url is not None
        return VaultClient(settings.api_url, longest_wait=MCP_LONGEST_WAIT)
    return VaultClient(
        INTERNAL_URL,
        transport=httpx2.ASGITransport(app=vault_app),  # what the carrier does not offer
        longest_wait=MCP_LONGEST_WAIT,
        carrier=in_process(vault_app),
    )


def local_key(settings: Settings, service: VaultService | None) -> str | None:
    """The key an unauthenticated local server acts with: MEMORYROUTER_KEY, else the one
    kept in the data directory (created with a new vault on first use)."""
    if settings.key:
        return settings.key
    if service is None:
        return None
    path = Path(settings.data_dir) / "local.key"
    if path.exists():
        private_file(path)
        return path.read_text(encoding="utf-8").strip()
    key, _ = service.create_vault(name="local")
    private_dir(path.parent)
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(key + "\n")
    return str(key)


def transport_security(settings: Settings) -> TransportSecuritySettings:
    public_host = httpx2.URL(settings.base_url).netloc.decode()
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*LOOPBACK_HOSTS, public_host, *settings.allowed_hosts],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", *settings.cors_origins],
    )


def shared_state(settings: Settings) -> State:
    """What the authorization server and the explorer keep beside the vault: on PostgreSQL
    (when either is served) a pool to the database their tables live in."""
    wanted = settings.ui == "on" or (settings.auth == "key" and settings.oauth == "embedded")
    url = settings.database_url if wanted and settings.on_postgres else None
    assert url is not None or not (wanted and settings.on_postgres)
    return State.open(
        settings.data_dir,
        database_url=url,
        sealing_key=settings.sealing_key,
        sealing_key_file=settings.sealing_key_file,
    )


def oauth_and_explorer(
    settings: Settings,
    client: VaultClient,
    policy: ScopePolicy,
    clock: Callable[[], float],
    state: State,
    service: VaultService | None,
    documents: DocumentFetching | None,
    default_key: str | None,
) -> tuple[EmbeddedAuthServer | None, Explorer | None]:
    """The embedded authorization server and the explorer, each when it is on, made
    together: Tidy lists the apps signed in to a vault (and disconnects one), and people who
    sign in with the identity provider open the explorer with it too."""
    explorer: Explorer | None = None

    async def explorer_signed_in(person: IdentitySignedIn) -> Response:
        assert explorer is not None  # made below, before the server answers a request
        return await explorer.identity_signed_in(person)

    oauth = None
    if settings.auth == "key" and settings.oauth == "embedded":
        opens_explorer = explorer_signed_in if settings.ui == "on" else None
        oauth = embedded_oauth(
            settings, client, policy, clock, state, service, documents, opens_explorer
        )
    if settings.ui == "on":
        explorer = memory_explorer(settings, client, default_key, clock, state, oauth)
    return oauth, explorer


def embedded_oauth(
    settings: Settings,
    client: VaultClient,
    policy: ScopePolicy,
    clock: Callable[[], float],
    state: State,
    service: VaultService | None,
    documents: DocumentFetching | None,
    explorer_signed_in: Callable[[IdentitySignedIn], Awaitable[Response]] | None = None,
) -> EmbeddedAuthServer:
    """The embedded authorization server as the settings describe it; a sign-in made for
    the explorer ends in ``explorer_signed_in``."""
    sign_in = oidc_providers(settings)
    return embedded_server(
        state,
        client,
        policy,
        issuer=settings.base_url,
        server_name=settings.server_name or httpx2.URL(settings.base_url).host,
        clock=clock,
        access_seconds=settings.oauth_access_token_seconds,
        refresh_seconds=settings.oauth_refresh_token_seconds,
        signing_seconds=settings.oauth_signing_key_days * 86_400,
        limits=OAuthLimits(
            settings.oauth_rate_limit_per_minute,
            settings.oauth_register_per_minute,
            settings.oauth_register_burst,
        ),
        documents=documents,
        sign_in=sign_in,
        provision=provisioning(service) if sign_in else None,
        explorer_signed_in=explorer_signed_in,
    )


def oidc_providers(settings: Settings) -> list[OidcProvider]:
    """With MEMORYROUTER_SIGNIN=oidc, the OpenID Providers people sign in with: the one the
    MEMORYROUTER_OIDC_* settings name, then those of MEMORYROUTER_OIDC_PROVIDERS."""
    if settings.signin != "oidc":
        return []
    given = list(settings.oidc_providers)
    if settings.oidc_issuer or settings.oidc_client_id or settings.oidc_client_secret:
        missing = [
            name
            for name, value in (
                ("MEMORYROUTER_OIDC_ISSUER", settings.oidc_issuer),
                ("MEMORYROUTER_OIDC_CLIENT_ID", settings.oidc_client_id),
                ("MEMORYROUTER_OIDC_CLIENT_SECRET", settings.oidc_client_secret),
            )
            if not value
        ]
        if missing:
            raise ConfigError(f"MEMORYROUTER_SIGNIN=oidc needs {', '.join(missing)}")
        assert settings.oidc_issuer and settings.oidc_client_id and settings.oidc_client_secret
        first = OidcProviderSettings(
            issuer=settings.oidc_issuer,
            client_id=settings.oidc_client_id,
            client_secret=settings.oidc_client_secret,
            name=settings.oidc_name,
            scopes=settings.oidc_scopes,
            allowed_domains=settings.oidc_allowed_domains,
            allowed_emails=settings.oidc_allowed_emails,
        )
        given.insert(0, first)
    if not given:
        raise ConfigError(
            "MEMORYROUTER_SIGNIN=oidc needs MEMORYROUTER_OIDC_ISSUER, MEMORYROUTER_OIDC_CLIENT_ID "
            "and MEMORYROUTER_OIDC_CLIENT_SECRET, or MEMORYROUTER_OIDC_PROVIDERS"
        )
    made: list[OidcProvider] = []
    for one in given:
        provider = OidcProvider(
            issuer=one.issuer,
            client_id=one.client_id,
            client_secret=one.client_secret,
            name=one.name,
            scopes=one.scopes,
            allowed_domains=tuple(one.allowed_domains),
            allowed_emails=tuple(one.allowed_emails),
        )
        if any(p.key == provider.key for p in made):
            raise ConfigError(f"the OpenID Provider {one.issuer} ({one.client_id}) is named twice")
        made.append(provider)
    return made


def provisioning(service: VaultService | None) -> Callable[[Identity], Awaitable[str]]:
    """How a person's first sign-in gets a vault: a new vault in the store this server
    serves, named by their email."""
    if service is None:
        raise ConfigError(
            "MEMORYROUTER_SIGNIN=oidc makes a vault for each person in the store this server "
            "serves: it cannot be used with MEMORYROUTER_API_URL"
        )
    serving = service

    async def provision(person: Identity) -> str:
        name = (person.email or "signed in")[: limits.MAX_ID_CHARS]
        key, _ = await anyio.to_thread.run_sync(lambda: serving.create_vault(name=name))
        return str(key)

    return provision


def external_issuer(settings: Settings, resource: str) -> ExternalIssuer:
    """The operator's own authorization server (``MEMORYROUTER_OAUTH=external``)."""
    if not settings.oauth_issuer or not settings.oauth_jwks_url:
        raise ConfigError(
            "MEMORYROUTER_OAUTH=external needs MEMORYROUTER_OAUTH_ISSUER and "
            "MEMORYROUTER_OAUTH_JWKS_URL"
        )
    return ExternalIssuer(
        issuer=settings.oauth_issuer,
        jwks_url=settings.oauth_jwks_url,
        audience=settings.oauth_audience or resource,
        vault_claim=settings.oauth_vault_claim,
        bindings_file=settings.oauth_bindings_file or settings.data_dir / "oauth-bindings.json",
    )


def create_server(
    settings: Settings,
    *,
    clock: Callable[[], float] = time.time,
    documents: DocumentFetching | None = None,
) -> Server:
    """``clock`` (seconds) is the server's time: what the vault dates writes and runs leases
    by, what the server's reflector waits its cooldown and backoff by, what the authorization
    server issues and checks tokens by; ``documents`` how it fetches client ID metadata
    documents (default: from the internet)."""
    keyless_on_this_machine_only(settings)
    writable_data_dir(settings.data_dir)  # 0700, whatever the umask (see private.py); writable
    service, vault_app = serve_vault(settings, clock)
    try:
        return _serve(settings, service, vault_app, clock, documents)
    except BaseException:
        close_vault(service)  # a server that does not start releases its vault
        raise


def keyless_on_this_machine_only(settings: Settings) -> None:
    """A server without keys acts with its vault's key for whoever reaches it: it binds
    only to loopback, and (LocalOnly) answers no request a proxy relayed, so naming proxies
    to trust means the settings want what it will never do."""
    if settings.auth != "none":
        return
    if not is_loopback(settings.host):
        raise ConfigError(
            "MEMORYROUTER_AUTH=none serves one vault without authentication and only binds to "
            f"a loopback address, not {settings.host}: to serve the network or a reverse "
            "proxy, use MEMORYROUTER_AUTH=key and memory keys"
        )
    if settings.trusted_proxies:
        raise ConfigError(
            "MEMORYROUTER_AUTH=none refuses every request a proxy relays, so "
            "MEMORYROUTER_TRUSTED_PROXIES has nothing to do: behind a reverse proxy, use "
            "MEMORYROUTER_AUTH=key and memory keys"
        )


def serve_vault(
    settings: Settings, clock: Callable[[], float] = time.time
) -> tuple[VaultService | None, FastAPI | None]:
    """The vault this process serves and its REST app, on ``clock`` (seconds); none when
    MEMORYROUTER_API_URL names a vault served elsewhere."""
    if settings.api_url:
        return None, None
    service, kind = build_service(settings, clock=lambda: int(clock() * 1000))
    try:
        return service, create_vault_app(settings, service=service, store_kind=kind)
    except BaseException:
        service.close()
        raise


def close_vault(service: VaultService | None) -> None:
    if service is not None:
        service.close()


def _serve(
    settings: Settings,
    service: VaultService | None,
    vault_app: FastAPI | None,
    clock: Callable[[], float],
    documents: DocumentFetching | None = None,
) -> Server:
    client = vault_client(settings, vault_app)
    reflector = server_reflector(settings, vault_app, clock)
    policy = load_policy()
    default_key = local_key(settings, service) if settings.auth == "none" else None
    binder = Binder(client, policy, ResultBudget(settings.mcp_result_tokens), default_key)
    mcp = build_server(binder, request_state_key(settings))
    endpoint: ASGIApp = mcp.streamable_http_app(
        stateless_http=True, json_response=True, transport_security=transport_security(settings)
    )
    state = shared_state(settings)
    try:
        oauth, explorer = oauth_and_explorer(
            settings, client, policy, clock, state, service, documents, default_key
        )
        guarded = guard(settings, endpoint, client, clock, oauth)
        routes: list[BaseRoute] = [*(oauth.routes if oauth else []), *guarded.routes]
        closing = guarded.closing
        if settings.proxy == "on":
            proxy = chat_proxy(settings, client, default_key)
            routes += proxy.routes()
            closing.append(proxy.aclose)
        if explorer is not None:
            closing.append(explorer.aclose)
    except BaseException:
        state.close()
        raise

    async def close_shared() -> None:
        state.close()

    closing.append(close_shared)  # after the explorer and the authorization server

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with mcp.session_manager.run(), reflecting(reflector):
            yield
        if oauth is not None:
            await oauth.aclose()
        for close in closing:
            await close()
        await client.aclose()
        close_vault(service)

    routes.append(Route("/mcp", endpoint=guarded.endpoint, methods=["GET", "POST", "DELETE"]))
    routes += entrance(explorer)
    if vault_app is not None:
        routes.append(Mount("/", app=vault_app))
    app = Starlette(routes=routes, lifespan=lifespan)
    served = cross_origin(app, settings.cors_origins, PUBLIC_CORS_PREFIXES)
    if explorer is not None:
        served = beside(explorer, served, transport_security(settings).allowed_hosts or [])
    if settings.auth == "none":  # no keys: every surface for clients on this machine only
        served = LocalOnly(served)
    return Server(observed(settings, served, app, vault_app), client, service, oauth)


def server_reflector(
    settings: Settings, vault_app: FastAPI | None, clock: Callable[[], float] = time.time
) -> ServerReflector[Any] | None:
    """With MEMORYROUTER_REFLECTOR_URL, the server's reflector, the consolidator of the
    vault's front (docs/reflector.md), waiting by ``clock`` (seconds); without, none."""
    if not settings.reflector_url:
        return None
    if vault_app is None:
        raise ConfigError(
            "MEMORYROUTER_REFLECTOR_URL consolidates the vault this server serves: set it on "
            "the server that serves the vault, not with MEMORYROUTER_API_URL"
        )
    if not settings.reflector_model:
        raise ConfigError(
            "MEMORYROUTER_REFLECTOR_URL needs MEMORYROUTER_REFLECTOR_MODEL, the model to ask"
        )
    if settings.reflector_key and settings.reflector_key_file:
        raise ConfigError(
            "give MEMORYROUTER_REFLECTOR_KEY or MEMORYROUTER_REFLECTOR_KEY_FILE, not both"
        )
    key_file = settings.reflector_key_file
    provider = Provider(
        settings.reflector_url,
        settings.reflector_format,
        settings.reflector_model,
        key_from_file(key_file) if key_file else settings.reflector_key,
        settings.reflector_timeout_seconds,
    )
    timing = Timing(settings.reflector_cooldown_seconds, settings.reflector_backoff_seconds)
    reflector = ServerReflector(
        ProviderModel(provider), in_process(vault_app).acting_for, timing, clock=clock
    )
    front_of(vault_app).consolidator = reflector
    return reflector


def reflecting(reflector: ServerReflector[Any] | None) -> AbstractAsyncContextManager[None]:
    """The reflector's runs while the server runs."""
    return nullcontext() if reflector is None else reflector.running()


def entrance(explorer: Explorer | None) -> list[BaseRoute]:
    """``/``: a browser opening the server's address lands in the explorer (when it is on)."""
    if explorer is None:
        return []
    return [Route("/", endpoint=to_explorer, methods=["GET", "HEAD"])]


async def to_explorer(_: Request) -> Response:
    return RedirectResponse("/ui", status_code=302)


def beside(explorer: Explorer, app: ASGIApp, allowed_hosts: list[str]) -> ASGIApp:
    """The explorer answers everything under /ui (its own 404s and headers included), the
    app everything else."""
    pages = explorer.app(allowed_hosts)

    async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
        ours = scope["type"] == "http" and explorer.serves(scope["path"])
        await (pages if ours else app)(scope, receive, send)

    return dispatch


def observed(
    settings: Settings, outer: ASGIApp, routed: Starlette, vault_app: FastAPI | None
) -> ASGIApp:
    """``outer`` with /metrics, every request counted by the template of its route in
    ``routed`` (docs/metrics.md); as it is with MEMORYROUTER_METRICS=off."""
    if settings.metrics == "off":
        return outer
    front = None if vault_app is None else front_of(vault_app)
    return Metrics(
        outer,
        routes=routed.routes,
        store="remote" if front is None else front.store_kind,
        backlog=None if front is None else front.backlog,
        token=settings.metrics_token or None,
        loopback=settings.metrics_open == "loopback",
    )


def chat_proxy(settings: Settings, client: VaultClient, default_key: str | None) -> ChatProxy:
    """Calls that bring no key act with ``default_key`` (MEMORYROUTER_AUTH=none): those must
    name this server in ``Host``, as /mcp's must, so a page on another name that resolves to
    this machine cannot reach the vault through the proxy."""
    upstreams = Upstreams(
        openai=settings.upstream_openai_url.rstrip("/"),
        anthropic=settings.upstream_anthropic_url.rstrip("/"),
        google=settings.upstream_google_url.rstrip("/"),
    )
    return ChatProxy(
        client,
        upstreams,
        max_body_bytes=settings.proxy_max_body_bytes,
        default_key=default_key,
        allowed_hosts=(
            None if default_key is None else transport_security(settings).allowed_hosts or []
        ),
        allowed_origins=settings.cors_origins,
        body_seconds=settings.body_timeout_seconds,
        max_answer_bytes=settings.proxy_max_answer_bytes,
    )


def memory_explorer(
    settings: Settings,
    client: VaultClient,
    default_key: str | None,
    clock: Callable[[], float],
    state: State,
    oauth: EmbeddedAuthServer | None = None,
) -> Explorer:
    """The explorer's cookies are Secure over https, and over plain http too unless the
    server both listens and is known on loopback (a development server without TLS). With
    the embedded authorization server, Tidy lists its grants, and the identity providers it
    signs people in with open the explorer too."""
    base = httpx2.URL(settings.base_url)
    sessions = (
        UiSessions.in_dir(settings.data_dir, state.sealer)
        if state.pool is None
        else UiSessions.postgres(state.pool, state.sealer)
    )
    return Explorer(
        client,
        sessions,
        secure_cookies=(
            base.scheme == "https" or not is_loopback(base.host) or not is_loopback(settings.host)
        ),
        default_key=default_key,
        clock=clock,
        sign_ins=TokenBuckets(
            limits.UI_SIGN_INS_PER_MINUTE,
            limits.UI_SIGN_INS_PER_MINUTE,
            monotonic_clock,
        ),
        identity=None if oauth is None else oauth.explorer_identity,
        apps=None if oauth is None else oauth.store,
    )


def guard(
    settings: Settings,
    endpoint: ASGIApp,
    client: VaultClient,
    clock: Callable[[], float],
    oauth: EmbeddedAuthServer | None = None,
) -> Protected:
    """With MEMORYROUTER_AUTH=key, ``endpoint`` behind bearer authentication (memory keys,
    and tokens of the embedded or an external authorization server) and the scope
    challenge; with MEMORYROUTER_AUTH=none, as it is."""
    if settings.auth != "key":
        return Protected(endpoint)
    resource = settings.base_url + "/mcp"
    if oauth is not None:
        issuers = [oauth.issuer]
        return protect(
            endpoint, client, resource=resource, clock=clock, tokens=oauth.verifier, issuers=issuers
        )
    external = external_issuer(settings, resource) if settings.oauth == "external" else None
    return protect(endpoint, client, resource=resource, clock=clock, external=external)


def create_stdio_server(settings: Settings) -> tuple[MCPServer, VaultClient]:
    """The MCP server for stdio: no HTTP auth, it acts with MEMORYROUTER_KEY."""
    _, vault_app = serve_vault(settings)
    client = vault_client(settings, vault_app)
    budget = ResultBudget(settings.mcp_result_tokens)
    binder = Binder(client, load_policy(), budget, settings.key)
    return build_server(binder, request_state_key(settings)), client


def migrate_state(settings: Settings) -> dict[str, int]:
    """The authorization server's and the explorer's tables brought up to date where they
    live, and the version each is at: in the shared database on PostgreSQL; on SQLite in
    their files in the data directory, those that exist (a server makes each the first time
    it needs it, migrated)."""
    parts = {"oauth": (AUTH_MIGRATIONS, AUTH_DB_FILE), "ui": (UI_MIGRATIONS, UI_DB_FILE)}
    versions: dict[str, int] = {}
    url = settings.database_url if settings.on_postgres else None
    pool = PostgresPool(url, pool_max=1) if url else None
    try:
        for name, (migrations, file) in parts.items():
            path = Path(settings.data_dir) / file
            if pool is None and not path.exists():
                continue
            database = pool.database(migrations) if pool else Database.sqlite(path, migrations)
            try:
                versions[name] = database.schema_version(migrations)
            finally:
                if pool is None:
                    database.close()
    finally:
        if pool is not None:
            pool.close()
    return versions


def request_state_key(settings: Settings) -> bytes:
    """The key sealing what a multi-round MCP call keeps between rounds (auth/state/)."""
    return sealed_state_key(
        settings.data_dir,
        sealing_key=settings.sealing_key,
        sealing_key_file=settings.sealing_key_file,
    )
