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

import base64
import hashlib
import ipaddress
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio.to_thread
import httpx2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from fastapi import FastAPI
from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_memoryrouter import limits
from mcp_memoryrouter.auth.metadata import resource_metadata_url, resource_routes
from mcp_memoryrouter.auth.pages import OIDC_CALLBACK_PATH, IdentityProvider
from mcp_memoryrouter.auth.resource.challenge import ScopeChallenge, SingleAuthorization
from mcp_memoryrouter.auth.resource.external import (
    ExternalTokenVerifier,
    RemoteKeys,
    load_bindings,
)
from mcp_memoryrouter.auth.resource.memory_keys import MemoryKeyVerifier
from mcp_memoryrouter.auth.resource.verifiers import AnyOfVerifiers
from mcp_memoryrouter.auth.scopes import FIRST_CONNECTION_SCOPES, ScopePolicy, load_policy
from mcp_memoryrouter.auth.server.clients import DocumentFetching
from mcp_memoryrouter.auth.server.embedded import (
    PUBLIC_CORS_PREFIXES,
    EmbeddedAuthServer,
    build_embedded,
)
from mcp_memoryrouter.auth.server.keyring import KeyRing
from mcp_memoryrouter.auth.server.provider import Lifetimes
from mcp_memoryrouter.auth.server.throttle import OAuthLimits
from mcp_memoryrouter.auth.signin.oidc import Identity, OidcClient, OidcSettings
from mcp_memoryrouter.auth.state.database import PostgresPool
from mcp_memoryrouter.auth.state.keyfiles import read_or_create
from mcp_memoryrouter.auth.state.sealing import Sealer
from mcp_memoryrouter.auth.state.store import AuthStore
from mcp_memoryrouter.client import VaultClient
from mcp_memoryrouter.config import OidcProviderSettings, Settings
from mcp_memoryrouter.errors import ConfigError
from mcp_memoryrouter.forwarding import LocalOnly
from mcp_memoryrouter.mcp.binding import Binder
from mcp_memoryrouter.mcp.budget import Budget
from mcp_memoryrouter.mcp.server import build_server
from mcp_memoryrouter.metrics import Metrics
from mcp_memoryrouter.private import open_private, private_dir, private_file
from mcp_memoryrouter.proxy.relay import ChatProxy, Upstreams
from mcp_memoryrouter.ratelimit import TokenBuckets
from mcp_memoryrouter.ui.explorer import Explorer
from mcp_memoryrouter.ui.sessions import UiSessions
from mcp_memoryrouter.vault.app import (
    build_service,
    create_vault_app,
    in_process,
    monotonic_clock,
)
from mcp_memoryrouter.vault.service import VaultService

REQUEST_STATE_KEY_FILE = "mcp-request-state.key"

INTERNAL_URL = "http://vault.internal"
OIDC_TIMEOUT = 10.0  # seconds a call to the identity provider may take
# A tool call rides out a 429 that asks for at most this many seconds; a longer wait is a
# rate_limited tool error at once (the host is waiting, and the model can say when to retry).
MCP_LONGEST_WAIT = 2.0
LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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


@dataclass
class SharedState:
    """What the authorization server and the explorer keep beyond the vault: the sealing key
    (a value or a file replicas share, else the data directory's), and on PostgreSQL a small
    pool to the database their tables live in (else SQLite files in the data directory)."""

    settings: Settings
    pool: PostgresPool | None = None
    _sealer: Sealer | None = None
    service: VaultService | None = None  # the vault served here (new vaults are made in it)
    documents: DocumentFetching | None = None  # how client ID metadata documents are fetched

    @property
    def sealer(self) -> Sealer:
        """Read (or made in the data directory) when first needed, by the authorization
        server or the explorer only."""
        if self._sealer is None:
            self._sealer = sealing_key(self.settings)
        return self._sealer

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


def sealing_key(settings: Settings) -> Sealer:
    shared = shared_sealing_key(settings)
    return Sealer.in_dir(settings.data_dir) if shared is None else Sealer(shared)


def shared_sealing_key(settings: Settings) -> bytes | None:
    """The sealing key every replica is given (MEMORYROUTER_SEALING_KEY, or the file
    MEMORYROUTER_SEALING_KEY_FILE names), checked; None when neither is set."""
    if settings.sealing_key:
        key, where = settings.sealing_key.strip().encode(), "MEMORYROUTER_SEALING_KEY"
    elif settings.sealing_key_file:
        path = Path(settings.sealing_key_file)
        try:
            key = path.read_bytes().strip()
        except OSError as exc:
            raise ConfigError(
                f"MEMORYROUTER_SEALING_KEY_FILE {path}: not a readable Fernet key ({exc})"
            ) from exc
        where = f"MEMORYROUTER_SEALING_KEY_FILE {path}"
    else:
        return None
    try:
        Sealer(key)
    except ValueError as exc:
        raise ConfigError(
            f"{where} is not a Fernet key (32 url-safe base64-encoded bytes)"
        ) from exc
    return key


def shared_state(settings: Settings) -> SharedState:
    wanted = settings.ui == "on" or (settings.auth == "key" and settings.oauth == "embedded")
    if not (wanted and settings.on_postgres):
        return SharedState(settings)
    assert settings.database_url is not None
    return SharedState(settings, PostgresPool(settings.database_url))


def embedded_oauth(
    settings: Settings,
    client: VaultClient,
    policy: ScopePolicy,
    clock: Callable[[], float],
    shared: SharedState | None = None,
) -> EmbeddedAuthServer:
    lifetimes = Lifetimes(settings.oauth_access_token_seconds, settings.oauth_refresh_token_seconds)
    shared = shared or SharedState(settings)
    store, signer = None, None
    if shared.pool is not None:  # replicas share the state and the signing keys
        store = AuthStore.postgres(shared.pool)
        signer = KeyRing.postgres(
            shared.pool,
            shared.sealer,
            signing_seconds=settings.oauth_signing_key_days * 86_400,
            access_seconds=settings.oauth_access_token_seconds,
            clock=clock,
        )
    fetching = shared.documents or DocumentFetching(httpx2.AsyncClient())
    return build_embedded(
        settings.data_dir,
        issuer=settings.base_url,
        resource=settings.base_url + "/mcp",
        vault=client,
        policy=policy,
        lifetimes=lifetimes,
        limits=OAuthLimits(
            settings.oauth_rate_limit_per_minute,
            settings.oauth_register_per_minute,
            settings.oauth_register_burst,
        ),
        clock=clock,
        server_name=settings.server_name or httpx2.URL(settings.base_url).host,
        sealer=shared.sealer,
        store=store,
        signer=signer,
        identity_providers=identity_providers(settings, shared.service),
        http=fetching.http,
        resolver=fetching.resolver,
    )


def identity_providers(settings: Settings, service: VaultService | None) -> list[IdentityProvider]:
    """With MEMORYROUTER_SIGNIN=oidc, the OpenID Providers people sign in with: the one the
    MEMORYROUTER_OIDC_* settings name, then those of MEMORYROUTER_OIDC_PROVIDERS. Each makes
    a vault in this server's store for each person at their first sign-in."""
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

    made: list[IdentityProvider] = []
    for one in given:
        oidc = OidcSettings(
            issuer=one.issuer,
            client_id=one.client_id,
            client_secret=one.client_secret,
            redirect_uri=settings.base_url + OIDC_CALLBACK_PATH,
            scopes=one.scopes,
        )
        # which provider a sign-in went to, named in its state: the same on every replica
        key = hashlib.sha256(f"{one.issuer}\0{one.client_id}".encode()).hexdigest()[:8]
        if any(p.key == key for p in made):
            raise ConfigError(f"the OpenID Provider {one.issuer} ({one.client_id}) is named twice")
        made.append(
            IdentityProvider(
                client=OidcClient(oidc, httpx2.AsyncClient(timeout=OIDC_TIMEOUT)),
                name=one.name or httpx2.URL(one.issuer).host,
                provision=provision,
                allowed_domains=tuple(one.allowed_domains),
                allowed_emails=tuple(one.allowed_emails),
                key=key,
            )
        )
    return made


def external_oauth(
    settings: Settings, resource: str, clock: Callable[[], float]
) -> tuple[ExternalTokenVerifier, str]:
    """The verifier for ``MEMORYROUTER_OAUTH=external`` and the issuer it trusts."""
    if not settings.oauth_issuer or not settings.oauth_jwks_url:
        raise ConfigError(
            "MEMORYROUTER_OAUTH=external needs MEMORYROUTER_OAUTH_ISSUER and "
            "MEMORYROUTER_OAUTH_JWKS_URL"
        )
    path = settings.oauth_bindings_file or settings.data_dir / "oauth-bindings.json"
    bindings = load_bindings(path)
    verifier = ExternalTokenVerifier(
        RemoteKeys(httpx2.AsyncClient(), settings.oauth_jwks_url, clock=clock),
        bindings=bindings,
        issuer=settings.oauth_issuer,
        audience=settings.oauth_audience or resource,
        vault_claim=settings.oauth_vault_claim,
        clock=clock,
    )
    return verifier, settings.oauth_issuer


def public_cors(app: ASGIApp, cors: ASGIApp) -> ASGIApp:
    """Discovery and token endpoints answer any origin themselves; everything else goes
    through the configured CORS policy."""

    async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
        public = scope["type"] == "http" and scope["path"].startswith(PUBLIC_CORS_PREFIXES)
        await (app if public else cors)(scope, receive, send)

    return dispatch


def create_server(
    settings: Settings,
    *,
    clock: Callable[[], float] = time.time,
    documents: DocumentFetching | None = None,
) -> Server:
    """``clock`` (seconds) is what the authorization server issues and checks tokens by;
    ``documents`` how it fetches client ID metadata documents (default: from the internet)."""
    keyless_on_this_machine_only(settings)
    private_dir(settings.data_dir)  # 0700, whatever the umask (see private.py)
    service, vault_app = serve_vault(settings)
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


def serve_vault(settings: Settings) -> tuple[VaultService | None, FastAPI | None]:
    """The vault this process serves and its REST app; none when MEMORYROUTER_API_URL names
    a vault served elsewhere."""
    if settings.api_url:
        return None, None
    service, kind = build_service(settings)
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
    policy = load_policy()
    default_key = local_key(settings, service) if settings.auth == "none" else None
    binder = Binder(client, policy, Budget(settings.mcp_result_tokens), default_key)
    mcp = build_server(binder, request_state_key(settings))
    endpoint: ASGIApp = mcp.streamable_http_app(
        stateless_http=True, json_response=True, transport_security=transport_security(settings)
    )
    shared = shared_state(settings)
    shared.service = service
    shared.documents = documents
    try:
        guarded = guard(settings, endpoint, client, policy, clock, shared)
        routes, oauth, closing = guarded.routes, guarded.oauth, guarded.closing
        if settings.proxy == "on":
            proxy = chat_proxy(settings, client, default_key)
            routes += proxy.routes()
            closing.append(proxy.aclose)
        explorer = None
        if settings.ui == "on":
            explorer = memory_explorer(settings, client, default_key, clock, shared)
            closing.append(explorer.aclose)
            if oauth is not None:
                beside_oauth(explorer, oauth)
    except BaseException:
        shared.close()
        raise

    async def close_shared() -> None:
        shared.close()

    closing.append(close_shared)  # after the explorer and the authorization server

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
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
    cors = CORSMiddleware(
        app,
        allow_origins=settings.cors_origins,
        allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
        allow_headers=["*"],
        expose_headers=["Mcp-Session-Id", "WWW-Authenticate"],
    )
    served = public_cors(app, cors)
    if explorer is not None:
        served = beside(explorer, served, transport_security(settings).allowed_hosts or [])
    if settings.auth == "none":  # no keys: every surface for clients on this machine only
        served = LocalOnly(served)
    return Server(observed(settings, served, app, vault_app), client, service, oauth)


def beside_oauth(explorer: Explorer, oauth: EmbeddedAuthServer) -> None:
    """The explorer and the embedded authorization server, joined: Tidy lists the apps
    signed in to a vault (and disconnects one), and people who sign in with the identity
    provider open the explorer with it too."""
    explorer.tidying.apps = oauth.store
    if oauth.pages is not None:
        explorer.identity = oauth.pages.explorer_identity()
        oauth.pages.explorer_signed_in = explorer.identity_signed_in


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
    service: VaultService | None = None if vault_app is None else vault_app.state.service
    return Metrics(
        outer,
        routes=routed.routes,
        store="remote" if vault_app is None else vault_app.state.store_kind,
        backlog=None if service is None else service.backlog,
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
    shared: SharedState | None = None,
) -> Explorer:
    """The explorer's cookies are Secure over https, and over plain http too unless the
    server both listens and is known on loopback (a development server without TLS)."""
    base = httpx2.URL(settings.base_url)
    shared = shared or SharedState(settings)
    sessions = (
        UiSessions.in_dir(settings.data_dir, shared.sealer)
        if shared.pool is None
        else UiSessions.postgres(shared.pool, shared.sealer)
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
    )


@dataclass
class Guarded:
    """/mcp behind its authentication, with the routes and closers that come with it."""

    endpoint: ASGIApp
    routes: list[BaseRoute] = field(default_factory=list)
    oauth: EmbeddedAuthServer | None = None
    closing: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


def guard(
    settings: Settings,
    endpoint: ASGIApp,
    client: VaultClient,
    policy: ScopePolicy,
    clock: Callable[[], float],
    shared: SharedState | None = None,
) -> Guarded:
    """With MEMORYROUTER_AUTH=key, ``endpoint`` behind bearer authentication (memory keys,
    and tokens of the embedded or an external authorization server) and the scope
    challenge; with MEMORYROUTER_AUTH=none, as it is."""
    guarded = Guarded(endpoint)
    if settings.auth != "key":
        return guarded
    resource = settings.base_url + "/mcp"
    verifier = AnyOfVerifiers(MemoryKeyVerifier(client))
    metadata_url = None
    if settings.oauth == "embedded":
        guarded.oauth = embedded_oauth(settings, client, policy, clock, shared)
        verifier = AnyOfVerifiers(MemoryKeyVerifier(client), guarded.oauth.verifier)
        issuer = guarded.oauth.issuer
        guarded.routes += guarded.oauth.routes
    elif settings.oauth == "external":
        external, issuer = external_oauth(settings, resource, clock)
        guarded.closing.append(external.aclose)
        verifier = AnyOfVerifiers(MemoryKeyVerifier(client), external)
    if settings.oauth != "off":
        metadata_url = resource_metadata_url(resource)
        guarded.routes += resource_routes(resource, [issuer], FIRST_CONNECTION_SCOPES)
    guarded.endpoint = SingleAuthorization(
        AuthenticationMiddleware(
            AuthContextMiddleware(ScopeChallenge(endpoint, metadata_url)),
            backend=BearerAuthBackend(verifier),
        )
    )
    return guarded


def create_stdio_server(settings: Settings) -> tuple[MCPServer, VaultClient]:
    """The MCP server for stdio: no HTTP auth, it acts with MEMORYROUTER_KEY."""
    _, vault_app = serve_vault(settings)
    client = vault_client(settings, vault_app)
    budget = Budget(settings.mcp_result_tokens)
    binder = Binder(client, load_policy(), budget, settings.key)
    return build_server(binder, request_state_key(settings)), client


def request_state_key(settings: Settings) -> bytes:
    """The key sealing what a multi-round MCP call keeps between rounds: derived from the
    sealing key replicas share when one is given (so any replica carries any round, with no
    second secret to distribute), else kept in the data directory (0600). Either way a
    restart keeps calls in flight going."""
    shared = shared_sealing_key(settings)
    if shared is not None:
        derived = HKDF(hashes.SHA256(), 32, salt=None, info=_REQUEST_STATE_INFO).derive(shared)
        return base64.urlsafe_b64encode(derived)
    return read_or_create(settings.data_dir / REQUEST_STATE_KEY_FILE, _new_secret).strip()


# Domain separation: the derived key is never the sealing key, nor usable as it.
_REQUEST_STATE_INFO = b"mcp-memoryrouter mcp request state v1"


def _new_secret() -> bytes:
    return secrets.token_urlsafe(32).encode()
