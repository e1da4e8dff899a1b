"""Sign-in with an OpenID Provider (``MEMORYROUTER_SIGNIN=oidc``): this server is a relying
party of the operator's identity provider (Google, a company IdP, anything certified).

The flow is the authorization code flow with PKCE (S256), ``state`` and ``nonce``
(OpenID Connect Core 1.0 §3.1). The provider's endpoints come from its discovery document,
whose ``issuer`` must be exactly the configured one. The code is exchanged with the client's
secret (``client_secret_basic``), and the ID token is checked here, not trusted:

- its signature against the provider's JWKS (fetched again once when a token names a key
  it does not know: the provider rotated);
- ``iss`` exactly the issuer, ``aud`` naming this client (and ``azp`` when there are
  several audiences), ``exp`` not passed and ``iat`` not in the future (a minute of leeway),
  ``nonce`` the one this sign-in sent.

Each refusal says which of these failed, for the page that tells the person why.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx2
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"]
LEEWAY_SECONDS = 60
DISCOVERY_SECONDS = 3600  # how long the discovery document and keys are kept
UNREACHABLE = "The identity provider could not be reached. Try again in a moment."


class OidcRefused(Exception):
    """A sign-in the provider's answer does not allow; ``reason`` is for the person."""

    def __init__(self, reason: str, status: int = 403) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass(frozen=True)
class OidcSettings:
    issuer: str
    client_id: str
    client_secret: str
    redirect_uri: str
    scopes: str = "openid email profile"
    allowed_domains: tuple[str, ...] = ()
    allowed_emails: tuple[str, ...] = ()


@dataclass(frozen=True)
class Identity:
    issuer: str
    subject: str
    email: str | None
    email_verified: bool


@dataclass(frozen=True)
class Started:
    """What one sign-in keeps until the provider sends the person back."""

    state: str
    nonce: str
    verifier: str
    url: str  # where to send the browser


def challenge_of(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def admitted(identity: Identity, domains: Sequence[str], emails: Sequence[str]) -> str | None:
    """None when the operator's lists admit this person (no lists: everyone the provider
    signs in), else why not. A list is matched against a verified email only."""
    if not domains and not emails:
        return None
    email = (identity.email or "").lower()
    if not email or not identity.email_verified:
        return (
            "This server admits people by their email address, and the identity provider "
            "gave no verified one."
        )
    if email in {e.lower() for e in emails}:
        return None
    if email.rpartition("@")[2] in {d.lower().lstrip("@") for d in domains}:
        return None
    return f"{email} may not sign in to this server. Ask its operator to admit you."


def check_claims(
    claims: dict[str, Any], *, issuer: str, client_id: str, nonce: str, now: float
) -> Identity:
    """The person an ID token names, once every claim checks out (OIDC Core §3.1.3.7)."""
    if claims.get("iss") != issuer:
        raise OidcRefused(
            f"The sign-in came back from {claims.get('iss')!s}, not from {issuer}: refused."
        )
    audience = claims.get("aud")
    audiences = [audience] if isinstance(audience, str) else list(audience or [])
    if client_id not in audiences or (len(audiences) > 1 and claims.get("azp") != client_id):
        raise OidcRefused("The identity provider's answer was meant for another application.")
    expires, issued = claims.get("exp"), claims.get("iat")
    if not isinstance(expires, (int, float)) or now >= expires + LEEWAY_SECONDS:
        raise OidcRefused("The identity provider's answer has expired. Sign in again.", 400)
    if isinstance(issued, (int, float)) and issued > now + LEEWAY_SECONDS:
        raise OidcRefused("The identity provider's answer is dated in the future: refused.")
    if not isinstance(claims.get("nonce"), str) or not secrets.compare_digest(
        str(claims["nonce"]), nonce
    ):
        raise OidcRefused("The identity provider's answer belongs to another sign-in: refused.")
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise OidcRefused("The identity provider's answer names nobody: refused.")
    email = claims.get("email")
    return Identity(
        issuer,
        subject,
        email if isinstance(email, str) else None,
        claims.get("email_verified") is True,
    )


class OidcClient:
    """The relying party: discovery, the authorization URL, the code exchange and the ID
    token's checks. ``http`` reaches the provider."""

    def __init__(
        self,
        settings: OidcSettings,
        http: httpx2.AsyncClient,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._http = http
        self._clock = clock
        self._document: dict[str, Any] | None = None
        self._document_at = 0.0
        self._keys: KeySet | None = None

    async def aclose(self) -> None:
        await self._http.aclose()

    async def start(self, state_prefix: str = "") -> Started:
        """A new sign-in; its ``state`` begins with ``state_prefix`` (which provider, when a
        server has several: the callback reads it back from the state it chose itself)."""
        state, nonce = state_prefix + secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        verifier = secrets.token_urlsafe(48)
        document = await self._discovery()
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self.settings.client_id,
                "redirect_uri": self.settings.redirect_uri,
                "scope": self.settings.scopes,
                "state": state,
                "nonce": nonce,
                "code_challenge": challenge_of(verifier),
                "code_challenge_method": "S256",
            }
        )
        endpoint = str(document["authorization_endpoint"])
        separator = "&" if "?" in endpoint else "?"
        return Started(state, nonce, verifier, f"{endpoint}{separator}{query}")

    async def identity(self, code: str, verifier: str, nonce: str) -> Identity:
        """Exchange the code, check the ID token: who signed in."""
        document = await self._discovery()
        try:
            answer = await self._http.post(
                str(document["token_endpoint"]),
                data={
                    "grant_type": "authorization_code",
                    "code": code,
                    "redirect_uri": self.settings.redirect_uri,
                    "code_verifier": verifier,
                },
                auth=(self.settings.client_id, self.settings.client_secret),
                headers={"Accept": "application/json"},
            )
        except httpx2.HTTPError as exc:
            raise OidcRefused(
                "The identity provider could not be reached. Try again.", 502
            ) from exc
        if answer.status_code != 200:
            raise OidcRefused(
                "The identity provider did not accept this sign-in "
                f"({_error_of(answer)}). Start again from your app.",
                400,
            )
        token = answer.json().get("id_token")
        if not isinstance(token, str):
            raise OidcRefused("The identity provider sent no ID token: refused.", 502)
        claims = await self._verified(token)
        return check_claims(
            claims,
            issuer=self.settings.issuer,
            client_id=self.settings.client_id,
            nonce=nonce,
            now=self._clock(),
        )

    async def _verified(self, token: str) -> dict[str, Any]:
        """The token's claims, once its signature is one of the provider's keys."""
        for fresh in (False, True):
            keys = await self._key_set(fresh)
            try:
                return dict(jwt.decode(token, keys, algorithms=ALGORITHMS).claims)
            except (JoseError, ValueError) as exc:
                if not fresh and _unknown_key(exc):
                    continue  # the provider may have rotated: read its keys once more
                raise OidcRefused(
                    "The identity provider's answer is not signed by any of its keys: refused."
                ) from exc
        raise AssertionError("unreachable")

    async def _discovery(self) -> dict[str, Any]:
        now = self._clock()
        if self._document is not None and now - self._document_at < DISCOVERY_SECONDS:
            return self._document
        url = self.settings.issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            answer = await self._http.get(url, headers={"Accept": "application/json"})
            document = answer.json() if answer.status_code == 200 else None
        except (httpx2.HTTPError, ValueError) as exc:
            raise OidcRefused(
                "The identity provider could not be reached. Try again.", 502
            ) from exc
        if not isinstance(document, dict):
            raise OidcRefused(UNREACHABLE, 502)
        if document.get("issuer") != self.settings.issuer:
            raise OidcRefused(
                f"The identity provider calls itself {document.get('issuer')!s}, not "
                f"{self.settings.issuer}: this server's MEMORYROUTER_OIDC_ISSUER is wrong.",
                502,
            )
        self._document, self._document_at, self._keys = document, now, None
        return document

    async def _key_set(self, fresh: bool) -> KeySet:
        if self._keys is not None and not fresh:
            return self._keys
        document = await self._discovery()
        try:
            answer = await self._http.get(str(document["jwks_uri"]))
            self._keys = KeySet.import_key_set(answer.json())
        except (httpx2.HTTPError, ValueError, KeyError, JoseError) as exc:
            raise OidcRefused(
                "The identity provider's keys could not be read. Try again.", 502
            ) from exc
        return self._keys


def _unknown_key(exc: Exception) -> bool:
    return isinstance(exc, InvalidKeyIdError)


def _error_of(answer: httpx2.Response) -> str:
    try:
        body = answer.json()
        return str(body.get("error_description") or body.get("error") or answer.status_code)
    except ValueError:
        return f"HTTP {answer.status_code}"
