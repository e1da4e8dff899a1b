"""The OpenID Provider harness (tests/auth/oidc_idp.py) on its own: a code flow by hand.

No relying-party code of ours: the authorization request, the token request and the ID token's
checks are written out here, so that a failure in the relying party's tests is the relying
party's.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest
from joserfc import jwt
from joserfc.errors import ExpiredTokenError
from joserfc.jwk import KeySet

from tests.auth import oidc_idp as harness
from tests.auth.oidc_idp import Idp, IdpError, running_idp

CALLBACK = "http://127.0.0.1:9/callback"
CLIENT = {
    "client_id": "memoryrouter-test",
    "client_secret": "a-client-secret-of-32-characters!",
    "redirect_uris": [CALLBACK],
}
ACCOUNTS = {
    "alice": {
        "sub": "248289761001",
        "email": "alice@example.test",
        "email_verified": True,
        "name": "Alice Liddell",
    },
    "bob": {
        "sub": "90342.ASDFJWFA",
        "email": "bob@example.test",
        "email_verified": False,
        "name": "Bob Builder",
    },
}


@pytest.fixture(scope="module")
def idp() -> Iterator[Idp]:
    with running_idp([CLIENT], ACCOUNTS) as running:
        yield running


@dataclass
class Request:
    """One authorization request's secrets, as a relying party would keep them."""

    url: str
    state: str
    nonce: str
    verifier: str


def discovery(idp: Idp) -> dict[str, Any]:
    response = httpx2.get(idp.discovery_url)
    response.raise_for_status()
    document: dict[str, Any] = response.json()
    return document


def jwks(idp: Idp) -> Any:
    return httpx2.get(discovery(idp)["jwks_uri"]).json()


def authorization_request(idp: Idp, *, pkce: bool = True) -> Request:
    state, nonce = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    params = {
        "response_type": "code",
        "client_id": idp.client_id,
        "redirect_uri": CALLBACK,
        "scope": "openid email profile",
        "state": state,
        "nonce": nonce,
    }
    if pkce:
        params["code_challenge"] = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        params["code_challenge_method"] = "S256"
    endpoint = discovery(idp)["authorization_endpoint"]
    return Request(f"{endpoint}?{urlencode(params)}", state, nonce, verifier)


def callback_params(request: Request, location: str) -> dict[str, str]:
    assert location.startswith(CALLBACK + "?"), location
    params = {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}
    assert params["state"] == request.state
    return params


def token_response(idp: Idp, code: str, verifier: str | None) -> httpx2.Response:
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK}
    if verifier is not None:
        form["code_verifier"] = verifier
    return httpx2.post(
        discovery(idp)["token_endpoint"], data=form, auth=(idp.client_id, idp.client_secret)
    )


def verified_id_token(
    idp: Idp, id_token: str, nonce: str, now: int | None = None
) -> dict[str, Any]:
    keys = KeySet.import_key_set(jwks(idp))
    token = jwt.decode(id_token, keys, algorithms=["RS256"])
    jwt.JWTClaimsRegistry(
        now=now,
        iss={"essential": True, "value": idp.issuer},
        aud={"essential": True, "value": idp.client_id},
        nonce={"essential": True, "value": nonce},
        sub={"essential": True},
    ).validate(token.claims)
    return token.claims


def sign_in(idp: Idp, login: str, http: httpx2.Client | None = None) -> dict[str, Any]:
    """A whole code flow as ``login``: the verified ID token's claims."""
    request = authorization_request(idp)
    if http is None:
        with httpx2.Client() as browser:
            location = idp.sign_in(browser, request.url, login)
    else:
        location = idp.sign_in(http, request.url, login)
    params = callback_params(request, location)
    assert params["iss"] == idp.issuer  # RFC 9207
    response = token_response(idp, params["code"], request.verifier)
    assert response.status_code == 200, response.text
    return verified_id_token(idp, response.json()["id_token"], request.nonce)


def test_sign_in_gives_a_code_for_an_id_token_of_that_account(idp: Idp) -> None:
    assert idp.issuer == idp.url
    assert urlsplit(idp.issuer).hostname == "127.0.0.1"
    assert discovery(idp)["issuer"] == idp.issuer
    claims = sign_in(idp, "alice")
    assert claims["sub"] == idp.sub("alice") == "248289761001"
    assert claims["email"] == "alice@example.test"
    assert claims["email_verified"] is True
    assert claims["name"] == "Alice Liddell"


def test_two_logins_two_subs_and_the_same_login_the_same_sub(idp: Idp) -> None:
    first, other, again = (sign_in(idp, login)["sub"] for login in ("alice", "bob", "alice"))
    assert first == again == "248289761001"
    assert other == "90342.ASDFJWFA"


def test_a_signed_in_browser_is_signed_in_without_the_login_page(idp: Idp) -> None:
    with httpx2.Client() as browser:
        sign_in(idp, "bob", browser)
        # The same cookies: the IdP's session and grant; no page, whatever login is given.
        request = authorization_request(idp)
        location = idp.sign_in(browser, request.url, "alice")
        code = callback_params(request, location)["code"]
        response = token_response(idp, code, request.verifier)
        claims = verified_id_token(idp, response.json()["id_token"], request.nonce)
        assert claims["sub"] == idp.sub("bob")


def test_a_code_is_not_given_for_a_token_without_its_verifier(idp: Idp) -> None:
    request = authorization_request(idp)
    with httpx2.Client() as browser:
        location = idp.sign_in(browser, request.url, "alice")
    code = callback_params(request, location)["code"]
    response = token_response(idp, code, None)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"


def test_a_confidential_client_must_use_pkce(idp: Idp) -> None:
    request = authorization_request(idp, pkce=False)
    with httpx2.Client() as browser:
        location = idp.sign_in(browser, request.url, "alice")
    params = callback_params(request, location)
    assert params["error"] == "invalid_request"
    assert "PKCE" in params["error_description"]
    assert "code" not in params


def test_an_unknown_login_is_not_signed_in(idp: Idp) -> None:
    request = authorization_request(idp)
    with httpx2.Client() as browser, pytest.raises(IdpError, match="did not accept"):
        idp.sign_in(browser, request.url, "mallory")


def test_cancelling_on_the_consent_page_denies_access(idp: Idp) -> None:
    request = authorization_request(idp)
    with httpx2.Client() as browser:
        params = callback_params(request, idp.sign_in(browser, request.url, "bob", cancel=True))
    assert params["error"] == "access_denied"
    assert "code" not in params


def test_id_tokens_can_expire_at_once() -> None:
    with running_idp([CLIENT], ACCOUNTS, id_token_ttl=1) as idp:
        request = authorization_request(idp)
        with httpx2.Client() as browser:
            code = callback_params(request, idp.sign_in(browser, request.url, "alice"))["code"]
        id_token = token_response(idp, code, request.verifier).json()["id_token"]
        # Valid when issued (however long this machine took to get here)...
        issued = jwt.decode(id_token, KeySet.import_key_set(jwks(idp))).claims["iat"]
        claims = verified_id_token(idp, id_token, request.nonce, now=issued)
        assert claims["exp"] - claims["iat"] == 1
        # ...and expired a second later.
        time.sleep(max(0.0, claims["exp"] + 1 - time.time()))
        with pytest.raises(ExpiredTokenError):
            verified_id_token(idp, id_token, request.nonce)


def test_an_idp_can_claim_another_issuer() -> None:
    with running_idp([CLIENT], ACCOUNTS, issuer="http://localhost:{port}") as idp:
        assert urlsplit(idp.url).hostname == "127.0.0.1"
        assert idp.issuer == f"http://localhost:{urlsplit(idp.url).port}"
        assert discovery(idp)["issuer"] == idp.issuer != idp.url
        claims = sign_in(idp, "bob")  # checked against the claimed issuer
        assert claims["iss"] == idp.issuer


# The fixture, as a test directory would take it (its conftest.py importing it).
oidc_idp = harness.oidc_idp


def test_the_fixture_starts_an_idp_for_the_test(oidc_idp: harness.IdpFactory) -> None:
    idp = oidc_idp([CLIENT], {"carol": {"email": "carol@example.test"}}, pkce_required=False)
    request = authorization_request(idp, pkce=False)  # allowed with pkce_required=False
    with httpx2.Client() as browser:
        code = callback_params(request, idp.sign_in(browser, request.url, "carol"))["code"]
    claims = verified_id_token(
        idp, token_response(idp, code, None).json()["id_token"], request.nonce
    )
    assert claims["sub"] == idp.sub("carol") == "carol"  # no `sub`: the login name
    assert claims["email"] == "carol@example.test"
