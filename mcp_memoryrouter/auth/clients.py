"""OAuth clients: redirect-URI matching, dynamic registration checks (RFC 7591) and client ID
metadata documents (the client_id is an https URL of a JSON document describing the client)."""

from __future__ import annotations

import ipaddress
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp.server.auth.provider import RegistrationError
from mcp.shared.auth import InvalidRedirectUriError, OAuthClientInformationFull
from pydantic import AnyUrl, ValidationError

from mcp_memoryrouter.auth.scopes import ALL_SCOPES

LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
# ChatGPT's callback carries a per-connector id that changes when a connector is recreated.
CHATGPT_PREFIX = "https://chatgpt.com/connector/oauth/"
FORBIDDEN_SCHEMES = {"javascript", "data", "file", "vbscript", "about", "blob"}
DOCUMENT_LIMIT = 64 * 1024
DOCUMENT_TTL = 300.0


def is_loopback_host(host: str | None) -> bool:
    return (host or "").lower() in LOOPBACK_HOSTS


def redirect_matches(registered: str, requested: str) -> bool:
    """Exact match, except that loopback redirects may use any port (RFC 8252 §7.3) and a
    ChatGPT connector callback matches any other ChatGPT connector callback."""
    if registered == requested:
        return True
    reg, req = urlsplit(registered), urlsplit(requested)
    if req.scheme == "http" and is_loopback_host(req.hostname):
        return (reg.scheme, reg.hostname, reg.path or "/", reg.query) == (
            req.scheme,
            req.hostname,
            req.path or "/",
            req.query,
        )
    if registered.startswith(CHATGPT_PREFIX) and requested.startswith(CHATGPT_PREFIX):
        rest = requested.removeprefix(CHATGPT_PREFIX)
        return bool(rest) and "/" not in rest and not req.query and not req.fragment
    return False


class RegisteredClient(OAuthClientInformationFull):
    """A client as the authorization endpoint sees it: our redirect-URI rule."""

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        registered = [str(uri) for uri in self.redirect_uris or []]
        if redirect_uri is None:
            if len(registered) == 1:
                return AnyUrl(registered[0])
            raise InvalidRedirectUriError("redirect_uri is required")
        if any(redirect_matches(uri, str(redirect_uri)) for uri in registered):
            return redirect_uri
        raise InvalidRedirectUriError("redirect_uri is not registered for this client")


def check_redirect_uris(uris: list[str]) -> None:
    """Registration: https anywhere, http on loopback only, private-use schemes for native
    apps (RFC 8252 §7.1); never a fragment (RFC 6749 §3.1.2)."""
    if not uris:
        raise RegistrationError("invalid_redirect_uri", "at least one redirect_uri is required")
    for uri in uris:
        parts = urlsplit(uri)
        scheme = parts.scheme.lower()
        bad = (
            parts.fragment
            or scheme in FORBIDDEN_SCHEMES
            or (scheme == "http" and not is_loopback_host(parts.hostname))
            or (scheme == "https" and not parts.hostname)
        )
        if bad:
            raise RegistrationError("invalid_redirect_uri", f"redirect_uri not allowed: {uri}")


def full_client(info: dict[str, Any]) -> RegisteredClient:
    """Every client is registered with all scopes, so a later step-up is not refused with
    invalid_scope: what a token carries is decided at consent, not at registration."""
    return RegisteredClient.model_validate({**info, "scope": " ".join(ALL_SCOPES)})


def is_metadata_url(client_id: str) -> bool:
    return client_id.startswith(("https://", "http://"))


class MetadataDocuments:
    """Fetches and checks client ID metadata documents, cached for five minutes.

    ``allow_loopback`` admits http://127.0.0.1 documents (a server on loopback is a development
    server); otherwise the URL must be https on a host that is not an IP literal in a private,
    loopback or link-local range (a cheap guard against requests into the local network).
    """

    def __init__(
        self,
        http: httpx2.AsyncClient,
        *,
        allow_loopback: bool,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._http = http
        self._allow_loopback = allow_loopback
        self._clock = clock
        self._cache: dict[str, tuple[float, RegisteredClient | None]] = {}

    def acceptable(self, url: str) -> bool:
        parts = urlsplit(url)
        if parts.fragment or parts.username or parts.path in ("", "/"):
            return False
        host = parts.hostname or ""
        if parts.scheme == "http":
            return self._allow_loopback and is_loopback_host(host)
        if parts.scheme != "https" or not host:
            return False
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return host != "localhost"
        return self._allow_loopback or address.is_global

    async def fetch(self, client_id: str) -> RegisteredClient | None:
        now = self._clock()
        cached = self._cache.get(client_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        client = await self._load(client_id) if self.acceptable(client_id) else None
        if len(self._cache) > 1000:
            self._cache.clear()
        self._cache[client_id] = (now + DOCUMENT_TTL, client)
        return client

    async def _download(self, url: str) -> bytes | None:
        """The document's bytes: a 200 without redirects, at most DOCUMENT_LIMIT long."""
        chunks: list[bytes] = []
        try:
            async with self._http.stream("GET", url, follow_redirects=False, timeout=5) as response:
                if response.status_code != 200:
                    return None
                async for chunk in response.aiter_bytes():
                    chunks.append(chunk)
                    if sum(map(len, chunks)) > DOCUMENT_LIMIT:
                        return None
        except httpx2.HTTPError:
            return None
        return b"".join(chunks)

    async def _load(self, client_id: str) -> RegisteredClient | None:
        body = await self._download(client_id)
        try:
            document = json.loads(body) if body is not None else None
        except ValueError:
            return None
        if not isinstance(document, dict) or document.get("client_id") != client_id:
            return None
        uris = document.get("redirect_uris")
        if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
            return None
        if document.get("token_endpoint_auth_method", "none") != "none":
            return None  # a document cannot carry a secret: public clients only
        try:
            check_redirect_uris(uris)
            return full_client(
                {
                    "client_id": client_id,
                    "client_name": document.get("client_name"),
                    "client_uri": document.get("client_uri"),
                    "logo_uri": document.get("logo_uri"),
                    "redirect_uris": uris,
                    "grant_types": ["authorization_code", "refresh_token"],
                    "response_types": ["code"],
                    "token_endpoint_auth_method": "none",
                }
            )
        except (RegistrationError, ValidationError):
            return None
