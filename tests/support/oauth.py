"""The embedded authorization server on a real uvicorn on loopback whose public URL is known
before it starts (the issuer and the token audience depend on it), a clock the authorization
server reads, and the clients that walk its pages: a stand-in that submits the sign-in and
consent forms the way a browser would, PKCE, registration, token exchange, the SDK's client."""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import uvicorn
from mcp.client import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl
from starlette.types import ASGIApp

from mcp_memoryrouter.app import Server, create_server
from mcp_memoryrouter.auth.server.clients import DocumentFetching
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.vault.service import VaultService
from tests.support import Clock
from tests.support.loopback import borrowed

REDIRECT_URI = "http://127.0.0.1:7777/callback"


@dataclass
class OAuthServer:
    base: str  # the issuer
    server: Server
    service: VaultService
    key: str
    clock: Clock

    @property
    def mcp_url(self) -> str:
        return self.base + "/mcp"

    def vault_of(self, key: str) -> str:
        response = httpx2.get(
            self.base + "/v1/keys/current", headers={"Authorization": f"Bearer {key}"}
        )
        vault: str = response.json()["vault"]
        return vault

    def new_key(self, *, read_only: bool = False) -> str:
        key, _ = self.service.create_vault(read_only=read_only)
        return key


@contextmanager
def serve(app: ASGIApp, sock: socket.socket) -> Iterator[None]:
    """``app`` on a uvicorn of its own, listening on ``sock`` (bound by the caller)."""
    # as a TCP socket by name, so the connections it accepts get TCP_NODELAY (loopback.py)
    sock = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start within 10 s"
        time.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextmanager
def oauth_server_at(
    data_dir: Path, documents: DocumentFetching | None = None, **settings: Any
) -> Iterator[OAuthServer]:
    """A server on loopback; ``documents``: how it fetches client ID metadata documents."""
    with borrowed() as slot:
        base = slot.url
        clock = Clock()
        config = Settings(data_dir=data_dir, embeddings="none", public_url=base, **settings)
        server = create_server(config, clock=clock, documents=documents)
        assert server.service is not None
        service: VaultService = server.service
        key, _ = service.create_vault()
        with slot.serving(server.app, lifespan="on"):
            yield OAuthServer(base, server, service, key, clock)


class FormReader(HTMLParser):
    """The hidden fields, scope checkboxes (and which are ticked, and which are marked as a new
    request) and inputs of a page's form."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}
        self.scopes: list[str] = []
        self.ticked: list[str] = []
        self.disabled: list[str] = []
        self.inputs: list[str] = []  # the names of every input
        self.new: list[str] = []  # the checkboxes (value, or id when disabled) marked new
        self._in_new = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "li":
            self._in_new = "new" in (a.get("class") or "").split()
        if tag != "input":
            return
        if self._in_new and a.get("type") == "checkbox":
            self.new.append(str(a.get("value") or a.get("id")))
        self.inputs.append(str(a.get("name")))
        if a.get("type") == "hidden" and a.get("name"):
            self.fields[str(a["name"])] = a.get("value") or ""
        elif a.get("type") == "checkbox":
            if "disabled" in a:
                self.disabled.append(str(a.get("id")))
            elif a.get("name") == "scope":
                self.scopes.append(str(a.get("value")))
                if "checked" in a:
                    self.ticked.append(str(a.get("value")))


def read_form(html: str) -> FormReader:
    reader = FormReader()
    reader.feed(html)
    return reader


@dataclass
class Browser:
    """Follows the authorization server's pages with one cookie jar, like a browser: signs
    in when asked for the key, then answers with the scopes the page ticked except
    ``untick`` (a person who clicks Allow as the page stands)."""

    key: str
    untick: set[str] = field(default_factory=set)
    decision: str = "allow"
    http: httpx2.AsyncClient = field(default_factory=lambda: httpx2.AsyncClient(timeout=30))
    consent_scopes: list[str] = field(default_factory=list)  # what the last consent offered
    consents: list[str] = field(default_factory=list)  # every consent page's HTML
    sign_ins: int = 0  # how many times the key was asked for and typed
    visited: list[str] = field(default_factory=list)  # every URL this browser requested

    async def authorize(self, url: str) -> dict[str, str]:
        """Open the authorization URL, sign in, consent; the callback's query parameters."""
        location = await self.authorize_to(url)
        assert location.startswith(REDIRECT_URI.rsplit(":", 1)[0])
        return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}

    async def authorize_to(self, url: str) -> str:
        """Open the authorization URL, sign in, consent; where the browser is sent back to."""
        response = await self.get(url)
        assert response.status_code == 302, response.text
        sign_in = await self.get(response.headers["location"])
        if sign_in.status_code == 200:  # asked for the key
            form = read_form(sign_in.text)
            self.sign_ins += 1
            posted = await self.post(str(sign_in.url), {**form.fields, "memory_key": self.key})
        else:  # this browser's session already signed in
            posted = sign_in
        assert posted.status_code == 303, posted.text
        consent = await self.get(str(posted.url.join(posted.headers["location"])))
        assert consent.status_code == 200, consent.text
        assert self.key not in consent.text  # the key is never echoed
        form = read_form(consent.text)
        self.consent_scopes = form.scopes
        self.consents.append(consent.text)
        data: dict[str, str | list[str]] = {
            **form.fields,
            "scope": [s for s in form.ticked if s not in self.untick],
            "decision": self.decision,
        }
        done = await self.post(str(consent.url), data)
        assert done.status_code == 303, done.text
        location: str = done.headers["location"]
        return location

    async def get(self, url: str) -> httpx2.Response:
        self.visited.append(url)
        return await self.http.get(url)

    async def post(self, url: str, data: dict[str, Any]) -> httpx2.Response:
        self.visited.append(url)
        return await self.http.post(url, data=data)

    async def aclose(self) -> None:
        await self.http.aclose()


def pkce() -> tuple[str, str]:
    """(verifier, S256 challenge)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode().rstrip("=")


def register(server: OAuthServer, redirect_uris: list[str] | None = None) -> str:
    response = httpx2.post(
        server.base + "/register",
        json={
            "client_name": "Raw test client",
            "redirect_uris": redirect_uris or [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "scope": "memories:read",
        },
    )
    assert response.status_code == 201, response.text
    client_id: str = response.json()["client_id"]
    return client_id


def authorize_url(server: OAuthServer, client_id: str, challenge: str, **extra: str) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "st4te",
        "scope": "memories:read memories:write",
        "resource": server.mcp_url,
        **extra,
    }
    return str(httpx2.URL(server.base + "/authorize", params=params))


def exchange(server: OAuthServer, client_id: str, code: str, verifier: str) -> httpx2.Response:
    return httpx2.post(
        server.base + "/token",
        data={
            "grant_type": "authorization_code",
            "client_id": client_id,
            "code": code,
            "code_verifier": verifier,
            "redirect_uri": REDIRECT_URI,
            "resource": server.mcp_url,
        },
    )


def refresh(
    server: OAuthServer, client_id: str, token: str, scope: str | None = None
) -> httpx2.Response:
    data = {"grant_type": "refresh_token", "client_id": client_id, "refresh_token": token}
    if scope is not None:
        data["scope"] = scope
    return httpx2.post(server.base + "/token", data=data)


async def grant_tokens(
    server: OAuthServer, key: str | None = None, browser: Browser | None = None, **extra: str
) -> tuple[str, dict[str, Any]]:
    """Register, authorize through the pages, exchange: (client_id, token response). A
    ``browser`` passed in is left open (its session cookie lives on)."""
    client_id = register(server)
    verifier, challenge = pkce()
    own = browser or Browser(key or server.key)
    try:
        callback = await own.authorize(authorize_url(server, client_id, challenge, **extra))
    finally:
        if browser is None:
            await own.aclose()
    response = exchange(server, client_id, callback["code"], verifier)
    assert response.status_code == 200, response.text
    return client_id, response.json()


def call_mcp(server: OAuthServer, token: str, tool: str, **arguments: Any) -> httpx2.Response:
    return httpx2.post(
        server.mcp_url,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        },
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        },
        timeout=30,
    )


FIRST_CONNECTION = ["memories:read", "memories:reflect", "memories:write"]


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Flow:
    """An OAuthClientProvider whose browser is :class:`Browser`."""

    def __init__(self, server: OAuthServer, browser: Browser) -> None:
        self.browser = browser
        self.storage = MemoryStorage()
        self.callbacks: list[dict[str, str]] = []
        self.authorize_urls: list[str] = []
        self.provider = OAuthClientProvider(
            server_url=server.mcp_url,
            client_metadata=OAuthClientMetadata(
                client_name="Flow test",
                redirect_uris=[AnyUrl(REDIRECT_URI)],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            ),
            storage=self.storage,
            redirect_handler=self.redirect,
            callback_handler=self.callback,
        )

    async def redirect(self, url: str) -> None:
        self.authorize_urls.append(url)
        self.callbacks.append(await self.browser.authorize(url))

    async def callback(self) -> AuthorizationCodeResult:
        last = self.callbacks[-1]
        return AuthorizationCodeResult(code=last["code"], state=last.get("state"), iss=last["iss"])

    @asynccontextmanager
    async def client(self, server: OAuthServer) -> AsyncIterator[Client]:
        async with (
            httpx2.AsyncClient(auth=self.provider, timeout=30) as http,
            Client(streamable_http_client(server.mcp_url, http_client=http)) as client,
        ):
            yield client


CLIENT = {"client_id": "memoryrouter", "client_secret": "a-long-client-secret-for-tests"}


PEOPLE = {
    "ada": {"sub": "248289761001", "email": "ada@example.org", "email_verified": True},
    "bob": {"sub": "248289761002", "email": "bob@example.org", "email_verified": True},
    "eve": {"sub": "248289761003", "email": "eve@evil.example", "email_verified": True},
}


def consented(
    server: OAuthServer,
    browser: httpx2.Client,
    answer: httpx2.Response,
    client_id: str,
    verifier: str,
) -> httpx2.Response | dict[str, Any]:
    """After the provider's redirect back (``answer``): consent, and the code exchanged for
    the token response; or ``answer`` itself when the callback refused."""
    if answer.status_code != 303:
        return answer
    consent = browser.get(server.base + answer.headers["location"])
    form = read_form(consent.text)
    done = browser.post(
        server.base + "/oauth/consent",
        data={**form.fields, "scope": form.scopes, "decision": "allow"},
    )
    assert done.status_code == 303, done.text
    assert done.headers["location"].startswith(REDIRECT_URI)
    code = parse_qs(urlsplit(done.headers["location"]).query)["code"][0]
    tokens = exchange(server, client_id, code, verifier)
    assert tokens.status_code == 200, tokens.text
    body: dict[str, Any] = tokens.json()
    return body
