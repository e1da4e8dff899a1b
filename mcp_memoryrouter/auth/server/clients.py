"""OAuth clients: redirect-URI matching, dynamic registration checks (RFC 7591) and client ID
metadata documents (the client_id is an https URL of a JSON document describing the client)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp.server.auth.provider import RegistrationError
from mcp.shared.auth import (
    InvalidRedirectUriError,
    OAuthClientInformationFull,
    OAuthClientMetadataBase,
)
from pydantic import AnyUrl, ValidationError

from mcp_memoryrouter.auth.scopes import ALL_SCOPES
from mcp_memoryrouter.auth.server.addresses import (
    Resolver,
    allowed_address,
    literal_address,
    system_resolver,
    vetted_address,
)
from mcp_memoryrouter.edge.addresses import is_loopback, is_loopback_address

# ChatGPT's callback carries a per-connector id that changes when a connector is recreated.
CHATGPT_PREFIX = "https://chatgpt.com/connector/oauth/"
DOCUMENT_LIMIT = 64 * 1024  # bytes of one client ID metadata document
DOCUMENT_SECONDS = 5.0  # to resolve, connect and download it, all told
DOCUMENT_TTL = 300.0
MAX_CLIENT_NAME = 200
MAX_URI_LENGTH = 1024
MAX_REDIRECT_URIS = 10
UNUSED_CLIENT_SECONDS = 86_400  # a registration no one authorized with within a day is forgotten
URI_FIELDS = ("client_uri", "logo_uri", "tos_uri", "policy_uri", "jwks_uri")


def redirect_matches(registered: str, requested: str) -> bool:
    """Exact match, except that loopback redirects may use any port (RFC 8252 §7.3) and a
    ChatGPT connector callback matches any other ChatGPT connector callback."""
    if registered == requested:
        return True
    reg, req = urlsplit(registered), urlsplit(requested)
    if req.scheme == "http" and is_loopback(req.hostname):
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
            if len(registered) != 1:
                raise InvalidRedirectUriError("redirect_uri is required")
            redirect_uri = AnyUrl(registered[0])
        requested = str(redirect_uri)
        if not any(redirect_matches(uri, requested) for uri in registered):
            raise InvalidRedirectUriError("redirect_uri is not registered for this client")
        # What matched must also be what registration accepts today: a loopback redirect
        # matches on its host alone (not its user info), and a client may predate a rule.
        problem = redirect_uri_problem(requested)
        if problem:
            raise InvalidRedirectUriError(
                f"redirect_uri {problem}; register the client again with one this server accepts"
            )
        return redirect_uri


def redirect_uri_problem(uri: str) -> str | None:
    """What is wrong with a redirect URI, or None: https anywhere, http on loopback only,
    private-use schemes of the reverse-domain form for native apps (RFC 8252 §7.1); never a
    fragment, not even an empty one (RFC 6749 §3.1.2); never a user name or password, which
    would make ``https://claude.ai@evil.example/cb`` read as claude.ai to a person (the
    semantic attack of RFC 3986 §7.6). Every other scheme is refused."""
    if len(uri) > MAX_URI_LENGTH:
        return f"is longer than {MAX_URI_LENGTH} characters"
    try:
        parts = urlsplit(uri)
        host = parts.hostname
    except ValueError:
        return "is not a URL"
    scheme = parts.scheme.lower()
    if "#" in uri:
        return "has a fragment (remove the '#' and what follows)"
    if "@" in parts.netloc:
        return "has a user name or password before the host (remove the part up to '@')"
    if scheme == "https":
        return None if host else "has no host"
    if scheme == "http":
        return None if is_loopback(host) else "is http off loopback (use https)"
    if "." in scheme:
        return None  # com.example.app:/callback
    return "must be https, http on loopback, or a reverse-domain scheme like com.example.app"


def check_redirect_uris(uris: list[str]) -> None:
    if not uris:
        raise RegistrationError("invalid_redirect_uri", "at least one redirect_uri is required")
    if len(uris) > MAX_REDIRECT_URIS:
        raise RegistrationError(
            "invalid_redirect_uri", f"at most {MAX_REDIRECT_URIS} redirect_uris are allowed"
        )
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem:
            raise RegistrationError("invalid_redirect_uri", f"redirect_uri {problem}: {uri[:80]}")


def check_registration(info: OAuthClientMetadataBase, redirect_uris: list[str]) -> None:
    """Field sizes (what is stored and shown on the consent page stays small), then the
    redirect URIs."""
    if info.client_name is not None and len(info.client_name) > MAX_CLIENT_NAME:
        raise RegistrationError(
            "invalid_client_metadata", f"client_name is longer than {MAX_CLIENT_NAME} characters"
        )
    for field in URI_FIELDS:
        value = getattr(info, field)
        if value is not None and len(str(value)) > MAX_URI_LENGTH:
            raise RegistrationError(
                "invalid_client_metadata", f"{field} is longer than {MAX_URI_LENGTH} characters"
            )
    check_redirect_uris(redirect_uris)


def full_client(info: dict[str, Any]) -> RegisteredClient:
    """Every client is registered with all scopes, so a later step-up is not refused with
    invalid_scope: what a token carries is decided at consent, not at registration."""
    return RegisteredClient.model_validate({**info, "scope": " ".join(ALL_SCOPES)})


@dataclass(frozen=True)
class DocumentFetching:
    """How client ID metadata documents are fetched: ``resolver`` names the addresses of the
    document's host, ``http`` fetches it from the one checked. The server's own reaches the
    internet; a test puts a local double of a client's site (chatgpt.com) behind both."""

    http: httpx2.AsyncClient
    resolver: Resolver = system_resolver


def is_metadata_url(client_id: str) -> bool:
    return client_id.startswith(("https://", "http://"))


class MetadataDocuments:
    """Fetches and checks client ID metadata documents, cached for five minutes.

    The URL must be https on the default port, without credentials, on a host whose every
    address is public (loopback, private, link-local, multicast, reserved and unspecified
    addresses are refused in every spelling); the connection goes to the address that was
    checked. ``allow_loopback`` (a server on loopback is a development server) also admits
    loopback addresses, and http to them. One deadline covers the whole fetch and one size
    cap the whole document.
    """

    def __init__(
        self,
        http: httpx2.AsyncClient,
        *,
        allow_loopback: bool,
        clock: Callable[[], float] = time.time,
        resolver: Resolver = system_resolver,
        deadline: float = DOCUMENT_SECONDS,
        size_limit: int = DOCUMENT_LIMIT,
    ) -> None:
        self._http = http
        self._allow_loopback = allow_loopback
        self._clock = clock
        self._resolver = resolver
        self._deadline = deadline
        self._size_limit = size_limit
        self._cache: dict[str, tuple[float, RegisteredClient | None]] = {}

    def parse(self, url: str) -> httpx2.URL | None:
        """The URL, if its shape is acceptable (before any address is looked at)."""
        try:
            parsed = httpx2.URL(url)
            port = parsed.port
        except httpx2.InvalidURL:
            return None
        if parsed.fragment or parsed.userinfo or parsed.path in ("", "/") or not parsed.host:
            return None
        if parsed.scheme == "http":
            return parsed if self._allow_loopback and (port or 80) <= 65_535 else None
        if parsed.scheme != "https" or port is not None:  # https on its default port only
            return None
        if parsed.host == "localhost" and not self._allow_loopback:
            return None
        return parsed

    def acceptable(self, url: str) -> bool:
        """The URL's shape is acceptable and, when its host is an address literal, so is it."""
        parsed = self.parse(url)
        if parsed is None:
            return False
        literal = literal_address(parsed.host)
        if parsed.scheme == "http":  # a name must then resolve to loopback only
            return literal is None or is_loopback_address(literal)
        return literal is None or allowed_address(literal, allow_loopback=self._allow_loopback)

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
        """The document's bytes: a 200 without redirects, within the deadline and the cap."""
        with anyio.move_on_after(self._deadline):
            try:
                return await self._pinned_download(url)
            except httpx2.HTTPError:
                return None
        return None

    async def _pinned_download(self, url: str) -> bytes | None:
        parsed = self.parse(url)
        assert parsed is not None
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        address = await vetted_address(
            parsed.host,
            port,
            self._resolver,
            allow_loopback=self._allow_loopback,
            loopback_only=parsed.scheme == "http",
        )
        if address is None:
            return None
        # Connect to the checked address; TLS (SNI, certificate) and Host name the host.
        # No connection is reused: another host may share the address.
        pinned = parsed.copy_with(host=str(address))
        headers = {"Host": parsed.netloc.decode("ascii"), "Connection": "close"}
        extensions = {"sni_hostname": parsed.host}
        async with self._http.stream(
            "GET", pinned, headers=headers, extensions=extensions, follow_redirects=False
        ) as response:
            if response.status_code != 200:
                return None
            return await self._capped(response)

    async def _capped(self, response: httpx2.Response) -> bytes | None:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._size_limit:
            return None
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > self._size_limit:
                return None
        return bytes(body)

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
            client = full_client(
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
            check_registration(client, uris)
            return client
        except (RegistrationError, ValidationError):
            return None
