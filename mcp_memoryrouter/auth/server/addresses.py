"""Which network addresses the authorization server may fetch a client's document from.

A client ID metadata document is fetched from a URL the client chooses, so the host must not
lead into this machine or its network. The host is resolved first and every address it
resolves to checked; the connection is then opened to the address that was checked, never
looked up again (a name that answers a public address to the check and a private one to the
connection is the DNS-rebinding trick this defeats).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable

import anyio

from mcp_memoryrouter.edge.addresses import IPAddress, is_loopback_address, unmapped

# (host, port) -> the addresses it resolves to, as strings
Resolver = Callable[[str, int], Awaitable[list[str]]]
# What the C library's inet_aton reads as an IPv4 address besides dotted quads: shorthand
# (127.1), one number (2130706433), hex (0x7f000001) and octal (0177.0.0.1) parts.
LOOSE_IPV4 = re.compile(r"[0-9a-fA-FxX.]+")


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def literal_address(host: str) -> IPAddress | None:
    """The address ``host`` names literally, in any spelling a resolver accepts; None for a
    name that has to be looked up."""
    bare = host.strip("[]")
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if not LOOSE_IPV4.fullmatch(bare):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(bare))
    except OSError:
        return None


def is_public(address: IPAddress) -> bool:
    """Globally routable unicast: not loopback, private, link-local, site-local, multicast,
    reserved, unspecified or shared (100.64/10), nor 6to4 for any of those."""
    address = unmapped(address)
    if isinstance(address, ipaddress.IPv6Address) and (
        address.is_site_local  # deprecated, yet "global" to the ipaddress module
        or (address.sixtofour is not None and not is_public(address.sixtofour))
    ):
        return False
    return address.is_global and not (
        address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or address.is_link_local
        or is_loopback_address(address)
        or address.is_private
    )


def allowed_address(address: IPAddress, *, allow_loopback: bool) -> bool:
    return is_public(address) or (allow_loopback and is_loopback_address(address))


async def vetted_address(
    host: str, port: int, resolver: Resolver, *, allow_loopback: bool, loopback_only: bool
) -> IPAddress | None:
    """The address to connect to for ``host``, or None when any address it resolves to is
    not allowed (``loopback_only``: when any is not loopback)."""
    literal = literal_address(host)
    try:
        named = [] if literal else await resolver(host, port)
        found = [literal] if literal else [ipaddress.ip_address(a) for a in named]
    except (OSError, ValueError):
        return None
    if not found:
        return None
    if loopback_only:
        ok = all(is_loopback_address(a) for a in found)
    else:
        ok = all(allowed_address(a, allow_loopback=allow_loopback) for a in found)
    return unmapped(found[0]) if ok else None
