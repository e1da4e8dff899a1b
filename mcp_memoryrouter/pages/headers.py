"""The security headers of every HTML answer, written once: no framing, no sniffing, no
caching, the referrer kept to this origin, and a Content-Security-Policy that allows what the
page loads from this server and nothing else (no inline script or style anywhere).

The policies differ by what the pages load:

- the explorer (``/ui``): its stylesheet and its one script, forms posted to itself only; its
  window is its own (``Cross-Origin-Opener-Policy``);
- the sign-in and consent pages (``/oauth``): the stylesheet, no script. No ``form-action``:
  browsers apply it to the redirect to the client's callback as well. No opener policy
  either: an app may open the sign-in in a window of its own and wait for it;
- the small refusals past a rate or a size (``auth/server/throttle.py``): nothing at all.
"""

from __future__ import annotations

from collections.abc import Mapping

EXPLORER_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SIGN_IN_CSP = "default-src 'none'; style-src 'self'; frame-ancestors 'none'; base-uri 'none'"
REFUSAL_CSP = "default-src 'none'; frame-ancestors 'none'"


def security_headers(csp: str, *, own_window: bool = False) -> dict[str, str]:
    """The headers of a page whose policy is ``csp``; ``own_window``: no page of another
    site keeps a handle on its window."""
    headers = {
        "content-security-policy": csp,
        "x-frame-options": "DENY",
        "x-content-type-options": "nosniff",
        # same-origin, not no-referrer: with no-referrer a browser sends "Origin: null" on
        # a page's own form posts, which the origin check (asgi.foreign_origin) refuses; no
        # address is sent to another site either way
        "referrer-policy": "same-origin",
        "cache-control": "no-store",
    }
    if own_window:
        headers["cross-origin-opener-policy"] = "same-origin"
    return headers


EXPLORER_HEADERS = security_headers(EXPLORER_CSP, own_window=True)
SIGN_IN_HEADERS = security_headers(SIGN_IN_CSP)
REFUSAL_HEADERS = security_headers(REFUSAL_CSP)
# the stylesheet the authorization server serves (the explorer's assets get the explorer's
# headers): read as CSS only, and checked again before each use
ASSET_HEADERS = {"cache-control": "no-cache", "x-content-type-options": "nosniff"}


def raw(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """``headers`` as an ASGI message carries them."""
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]
