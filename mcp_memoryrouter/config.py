"""Settings, read from ``MEMORYROUTER_*`` environment variables by composition roots only."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, IPvAnyNetwork
from pydantic_settings import BaseSettings, SettingsConfigDict

from mcp_memoryrouter import limits


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "mcp-memoryrouter"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcp-memoryrouter"


class OidcProviderSettings(BaseModel):
    """One OpenID Provider people may sign in with (MEMORYROUTER_OIDC_PROVIDERS)."""

    issuer: str
    client_id: str
    client_secret: str
    name: str | None = None
    scopes: str = "openid email profile"
    allowed_domains: list[str] = []
    allowed_emails: list[str] = []


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMORYROUTER_", extra="ignore")

    data_dir: Path = Field(default_factory=default_data_dir)
    database_url: str | None = None
    # PostgreSQL connection pool per server process (MEMORYROUTER_DB_POOL_MIN/MAX)
    db_pool_min: int = Field(default=1, ge=0, le=1000)
    db_pool_max: int = Field(default=10, ge=1, le=1000)
    lease_seconds: int = Field(default=limits.LEASE_SECONDS, ge=1, le=86_400)
    max_body_bytes: int = Field(default=limits.MAX_BODY_BYTES, ge=1024)
    # REST requests per key (or per client address without one): a token bucket of
    # rate_limit_burst tokens (default: a minute's worth) refilled at this rate; 0 = off
    rate_limit_per_minute: int = Field(default=600, ge=0)
    rate_limit_burst: int | None = Field(default=None, ge=1)
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65_535)
    # the edge (docs/security.md): the proxies whose forwarding headers (X-Forwarded-For,
    # X-Forwarded-Proto) name the client, as addresses or networks; none by default, so every
    # per-address limit sees the connection's own address
    trusted_proxies: list[IPvAnyNetwork] = []
    # seconds a connection may take to send a whole request head, and then its body
    head_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    body_timeout_seconds: float = Field(default=limits.BODY_SECONDS, gt=0, le=86_400)
    # open connections at once; past it, the oldest one that has not sent a whole request
    # head is closed to let a new one in (so /healthz answers through a flood of idle ones)
    max_connections: int = Field(default=2048, ge=16, le=1_000_000)
    # retrieval: the default embedder (local | none | openai) and its options
    embeddings: Literal["local", "none", "openai"] = "local"
    embed_threads: int = Field(default=1, ge=1, le=64)
    # how search ranks: the package's learned ranker (vault/search/learned.py), or fusion alone
    ranker: Literal["learned", "fusion"] = "learned"
    # what the local model is built into at the first start (shared by every data directory)
    cache_dir: Path = Field(default_factory=default_cache_dir)
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    openai_model: str = "text-embedding-3-small"
    openai_dim: int = Field(default=1536, ge=1)
    # MCP endpoint
    auth: Literal["key", "none"] = "key"
    # every MCP tool result (structured content + its text copy) stays within this estimate
    mcp_result_tokens: int = Field(default=10_000, ge=2_000, le=1_000_000)
    key: str | None = None  # stdio and auth=none: the memory key the server acts with
    api_url: str | None = None  # proxy to a remote MemoryRouter API instead of a local vault
    allowed_hosts: list[str] = Field(default_factory=list)  # Host values beyond loopback
    cors_origins: list[str] = Field(
        default_factory=lambda: ["http://localhost:6274", "http://127.0.0.1:6274"]
    )
    # OAuth: the embedded authorization server (issuer = public_url), or none (memory keys only)
    public_url: str | None = None  # e.g. https://memory.example.com; default http://{host}:{port}
    server_name: str | None = None  # what the sign-in pages call this server; default its host
    oauth: Literal["embedded", "external", "off"] = "embedded"
    oauth_access_token_seconds: int = Field(default=900, ge=30, le=86_400)
    oauth_refresh_token_seconds: int = Field(default=30 * 86_400, ge=60)
    # on PostgreSQL: how long a shared signing key signs before the next one is made
    oauth_signing_key_days: int = Field(default=limits.OAUTH_SIGNING_KEY_DAYS, ge=1, le=3650)
    # the Fernet key sealing memory keys (and, on PostgreSQL, the signing keys): replicas must
    # share it. A value, or a file every replica mounts; default {data_dir}/oauth-sealing.key
    sealing_key: str | None = None
    sealing_key_file: Path | None = None
    # per client address: requests a minute (bursts of as many) on /authorize, /token,
    # /revoke, /register and the sign-in pages, and registrations a minute; 0 = off
    oauth_rate_limit_per_minute: int = Field(default=60, ge=0)
    oauth_register_per_minute: int = Field(default=2, ge=0)
    oauth_register_burst: int = Field(default=10, ge=1)
    # oauth=external: the operator's identity provider issues the tokens
    oauth_issuer: str | None = None  # its issuer, exactly as its tokens carry it
    oauth_jwks_url: str | None = None
    oauth_audience: str | None = None  # default: the public /mcp URL
    oauth_vault_claim: str = "memoryrouter_vault"  # the claim naming a vault binding
    oauth_bindings_file: Path | None = None  # default: {data_dir}/oauth-bindings.json
    # the memory explorer (docs/explorer.md): web pages at /ui; off removes them
    ui: Literal["on", "off"] = "on"
    # Prometheus metrics at /metrics (docs/metrics.md); off removes the endpoint. A scrape
    # needs Authorization: Bearer <token>, or, with metrics_open=loopback, to come from this
    # machine with no proxy between; with neither, /metrics answers nobody (403)
    metrics: Literal["on", "off"] = "on"
    metrics_token: str | None = None
    metrics_open: Literal["loopback"] | None = None
    # sign-in on the authorization server's pages (docs/auth.md): a memory key, or an
    # OpenID Provider, whose people each get a vault of their own at their first sign-in
    signin: Literal["key", "oidc"] = "key"
    oidc_issuer: str | None = None
    oidc_client_id: str | None = None
    oidc_client_secret: str | None = None
    oidc_name: str | None = None  # what the sign-in button says (default: the issuer's host)
    oidc_scopes: str = "openid email profile"
    oidc_allowed_domains: list[str] = []  # verified email domains admitted (empty: anyone)
    oidc_allowed_emails: list[str] = []  # verified email addresses admitted
    # more providers beside (or instead of) the one above, each with the same fields:
    # MEMORYROUTER_OIDC_PROVIDERS='[{"issuer": "…", "client_id": "…", "client_secret": "…",
    # "name": "…", "allowed_domains": ["…"]}]'
    oidc_providers: list[OidcProviderSettings] = []
    # the chat proxy (docs/proxy.md): provider routes with memory; off removes the routes
    proxy: Literal["on", "off"] = "on"
    upstream_openai_url: str = "https://api.openai.com/v1"  # any OpenAI-compatible base URL
    upstream_anthropic_url: str = "https://api.anthropic.com"
    upstream_google_url: str = "https://generativelanguage.googleapis.com"
    proxy_max_body_bytes: int = Field(default=limits.PROXY_MAX_BODY_BYTES, ge=1024)
    # the most of a provider's answer held to be stored; a larger one is relayed, not stored
    proxy_max_answer_bytes: int = Field(default=limits.PROXY_MAX_ANSWER_BYTES, ge=1024)
    # the server's reflector (docs/reflector.md): a model that consolidates each vault on the
    # debt suggestion (and on "consolidate now"); no URL, no reflector. The URL is the
    # provider's base (an OpenAI-compatible server, Anthropic's or Google's API); the key is
    # given here, or in a file only the server's user may read (0600)
    reflector_url: str | None = None
    reflector_format: Literal["openai", "anthropic", "google"] = "openai"
    reflector_model: str | None = None
    reflector_key: str | None = Field(default=None, repr=False)
    reflector_key_file: Path | None = None
    reflector_timeout_seconds: float = Field(default=limits.REFLECTOR_CALL_SECONDS, gt=0, le=3600)
    # seconds between a run that committed and the next triggered one, and after a failed
    # run (doubled per failure in a row, up to 6 hours or the provider's Retry-After)
    reflector_cooldown_seconds: float = Field(
        default=limits.REFLECTOR_COOLDOWN_SECONDS, ge=0, le=86_400
    )
    reflector_backoff_seconds: float = Field(
        default=limits.REFLECTOR_BACKOFF_SECONDS, ge=0, le=86_400
    )

    @property
    def base_url(self) -> str:
        """The public origin clients reach this server at, without a trailing slash."""
        if self.public_url:
            return self.public_url.rstrip("/")
        # a wildcard bind address is no place to send a browser: name loopback instead
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "[::]", "") else self.host
        return f"http://{host}:{self.port}"

    @property
    def on_postgres(self) -> bool:
        url = self.database_url
        return bool(url and url.startswith(("postgresql://", "postgres://")))

    @property
    def sqlite_path(self) -> Path:
        if self.database_url and self.database_url.startswith("sqlite:///"):
            return Path(self.database_url.removeprefix("sqlite:///"))
        return self.data_dir / "vault.sqlite3"
