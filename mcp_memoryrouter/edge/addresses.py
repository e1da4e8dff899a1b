"""What is loopback, decided once: an address, a host name, a ``Host`` header.

127.0.0.0/8, ::1 and an IPv4-mapped loopback (``::ffff:127.0.0.1``, what a dual-stack
socket reports for an IPv4 client) are loopback addresses, bracketed or not; ``localhost``
is the one loopback name (RFC 6761 §6.3). Any other name is not, whatever it resolves to: a
page served from another site's name that resolves to this machine names that site.
"""

from __future__ import annotations

import ipaddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Host patterns (``name`` or ``name:*`` for any port) a server on this machine answers
LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]


def unmapped(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv4-mapped IPv6 one stands for; any other as it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_loopback_address(address: IPAddress) -> bool:
    return unmapped(address).is_loopback


def is_loopback_peer(address: str) -> bool:
    """A client's address (as its socket, or a proxy trusted to name it, reports it) is on
    loopback: an address only, never a name."""
    try:
        return is_loopback_address(ipaddress.ip_address(address.strip("[]")))
    except ValueError:
        return False


def is_loopback(host: str | None) -> bool:
    """``host`` (an address, bracketed or not, or a name; no port) is this machine."""
    name = (host or "").lower().rstrip(".")
    if name == "localhost":
        return True
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        return is_loopback_address(ipaddress.ip_address(name))
    except ValueError:
        return False


def host_name(host: str) -> str:
    """A ``Host`` header without its port: ``[::1]:8787`` is ``[::1]``, ``a.example:443``
    is ``a.example``, ``::1`` (unbracketed, no port) stays whole."""
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback_host(host: str | None) -> bool:
    """A ``Host`` header (port optional) naming this machine; none at all is not."""
    return host is not None and is_loopback(host_name(host))
