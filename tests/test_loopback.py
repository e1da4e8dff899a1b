"""One rule of what is loopback (edge/addresses.py), and every place that asks it agreeing.

Before the rule was written once, five helpers answered differently: an IPv4-mapped
loopback (``::ffff:127.0.0.1``, what a dual-stack socket reports) was loopback to the
keyless gate and /metrics but not to ``serve``'s check of its own address or to the OAuth
redirect rule, and ``127.0.0.2`` was loopback to some and not to others.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_memoryrouter.app import keyless_on_this_machine_only
from mcp_memoryrouter.auth.server.clients import redirect_matches, redirect_uri_problem
from mcp_memoryrouter.config import Settings
from mcp_memoryrouter.edge.addresses import host_name, is_loopback, is_loopback_host
from mcp_memoryrouter.edge.forwarding import relayed
from mcp_memoryrouter.errors import ConfigError
from mcp_memoryrouter.metrics import refusal

LOOPBACK = ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "::ffff:127.0.0.1", "[::ffff:127.0.0.1]"]
LOOPBACK_NAMES = ["localhost", "LOCALHOST", "localhost."]
NOT_LOOPBACK = ["10.0.0.1", "::ffff:10.0.0.1", "0.0.0.0", "::", "example.com", "127.0.0.1.nip.io"]


@pytest.mark.parametrize("host", [*LOOPBACK, *LOOPBACK_NAMES])
def test_these_are_this_machine(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", [*NOT_LOOPBACK, "", None])
def test_these_are_not(host: str | None) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize(
    ("header", "name"),
    [("[::1]:8787", "[::1]"), ("a.example:443", "a.example"), ("::1", "::1"), ("x", "x")],
)
def test_a_host_header_loses_its_port_and_keeps_its_brackets(header: str, name: str) -> None:
    assert host_name(header) == name


@pytest.mark.parametrize("address", [a for a in LOOPBACK if not a.startswith("[")])
def test_every_surface_takes_a_mapped_or_other_loopback_address_alike(address: str) -> None:
    bracketed = f"[{address}]" if ":" in address else address
    # the keyless server binds there
    keyless_on_this_machine_only(Settings(auth="none", host=address))
    # a client connecting from there reached the server directly
    scope: dict[str, Any] = {"type": "http", "headers": [], "http_version": "1.1"}
    scope["client"] = (address, 5000)
    assert relayed(scope) is None
    # /metrics open to loopback answers a request naming it in Host
    scope["headers"] = [(b"host", f"{bracketed}:8787".encode())]
    assert refusal(scope, None, loopback=True) is None
    assert is_loopback_host(f"{bracketed}:8787")
    # an OAuth client may redirect there over plain http, on any port (RFC 8252 §7.3)
    assert redirect_uri_problem(f"http://{bracketed}:5000/cb") is None
    assert redirect_matches(f"http://{bracketed}/cb", f"http://{bracketed}:5000/cb")


@pytest.mark.parametrize("address", ["10.0.0.1", "::ffff:10.0.0.1", "0.0.0.0"])
def test_every_surface_refuses_an_address_that_is_not_loopback(address: str) -> None:
    bracketed = f"[{address}]" if ":" in address else address
    with pytest.raises(ConfigError):
        keyless_on_this_machine_only(Settings(auth="none", host=address))
    scope = {"type": "http", "headers": [], "http_version": "1.1", "client": (address, 5000)}
    assert relayed(scope) is not None
    assert redirect_uri_problem(f"http://{bracketed}:5000/cb") is not None


def test_a_name_is_not_a_client_address() -> None:
    """A socket reports addresses; ``localhost`` as a client address came from a header."""
    scope = {"type": "http", "headers": [], "http_version": "1.1", "client": ("localhost", 1)}
    assert relayed(scope) is not None
