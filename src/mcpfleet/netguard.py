"""Request-forgery guard (CWE-918): ToolHive's private-address rule, checked on the address actually
connected to.

ToolHive (`pkg/networking`: `IsPrivateIP`, `NewHttpClientBuilder().WithPrivateIPs(false)`) refuses
to connect its OIDC clients (discovery, JWKS, token introspection) to private, loopback, link-local
and other non-public addresses unless the config allows it (`jwksAllowPrivateIP`; set for
Kubernetes service-account tokens, whose issuer is the in-cluster API server). The check runs in
the dialer, after name resolution, on every address tried: a name that resolves (or re-resolves,
DNS rebinding) to 169.254.169.254 is refused like the literal, and so are the other spellings of
an address (`2852039166`, `0251.0376.0251.0376`, `[::ffff:169.254.169.254]`), which the resolver
turns into the same socket address.

The blocked ranges are ToolHive's: 0.0.0.0/8, 127/8, RFC 1918, 169.254/16, ::1, fe80::/10, fc00::/7,
100.64/10 (CGN), the documentation nets, multicast, 240/4, ff00::/8, 64:ff9b:1::/48 and Teredo
2001::/32; NAT64 (64:ff9b::/96, 64:ff9b:1::/96) and 6to4 (2002::/16) addresses are judged by the
IPv4 address they embed, IPv4-mapped IPv6 likewise.

Webhooks are not guarded: ToolHive's webhook client only requires HTTPS (unless
`insecureSkipVerify`), which `mcpfleet.webhook.config` enforces, so in-cluster webhook Services keep
working as they do there.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

BLOCKED = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
        "::1/128",
        "fe80::/10",
        "fc00::/7",
        "100.64.0.0/10",
        "192.0.2.0/24",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "ff00::/8",
        "64:ff9b:1::/48",
        "2001::/32",
    )
)
NAT64 = tuple(ipaddress.ip_network(n) for n in ("64:ff9b::/96", "64:ff9b:1::/96"))
SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
LOOPBACK_NAMES = ("localhost",)


class PrivateAddressError(OSError):
    """A connection to a non-public address was refused (the message names the address)."""


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    packed = ip.packed
    if any(ip in net for net in NAT64):
        return ipaddress.IPv4Address(packed[12:16])
    if ip in SIX_TO_FOUR:
        return ipaddress.IPv4Address(packed[2:6])
    return None


def is_private(ip: IPAddress) -> bool:
    """ToolHive's `IsPrivateIP`: private, loopback, link-local, unspecified or otherwise not public."""
    if ip.is_loopback or ip.is_unspecified or ip.is_link_local:
        return True
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return is_private(embedded)
    return any(ip.version == net.version and ip in net for net in BLOCKED)


def is_loopback_host(host: str) -> bool:
    """A literal loopback address or `localhost` (ToolHive's `IsLocalhost`; names are not resolved)."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_sockaddr(sockaddr: tuple[Any, ...]) -> None:
    """Raise PrivateAddressError when the socket address about to be connected is not public."""
    address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
    if is_private(address):
        raise PrivateAddressError(f"refused to connect to the non-public address {address}")


def guarded_socket_factory() -> Callable[[tuple[Any, ...]], socket.socket]:
    """An aiohttp `TCPConnector(socket_factory=...)`: called with each resolved address before the
    connection is made, so the check covers literals, names and every retry of another address."""

    def factory(addr_info: tuple[Any, ...]) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        check_sockaddr(sockaddr)
        sock = socket.socket(family=family, type=type_, proto=proto)
        sock.setblocking(False)
        return sock

    return factory
