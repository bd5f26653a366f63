"""Which remote endpoints a workload may be pointed at (ToolHive's `allowPrivateEndpoint` rule).

Shared by MCPServerEntry (`spec.remoteUrl`, a gateway backend) and MCPRemoteProxy (`spec.remoteURL`,
the proxy's upstream). The check reads the URL only, like ToolHive's: no name is resolved (a bare
`name.svc` is never blocked, since it needs cluster DNS to mean anything). On Kubernetes:

- always refused: loopback, link-local, unspecified, cloud-metadata addresses and names, and the
  Kubernetes API server (`kubernetes.default…`);
- private (RFC 1918, unique-local `fc00::/7`, `*.cluster.local`): only with `allowPrivateEndpoint`.

An IPv4 address is read the way the resolver reads it (`2130706433`, `0x7f.1`, `0177.0.0.1` are
127.0.0.1) and an IPv4-mapped IPv6 address as its IPv4 address, so no spelling slips through.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from mcpfleet.reconcile.model import Platform

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALWAYS_BLOCKED_HOSTS = ("metadata.google.internal", "metadata")
KUBERNETES_API_HOSTS = ("kubernetes.default", "kubernetes.default.svc")
METADATA_IPS = ("169.254.169.254", "fd00:ec2::254")


def host_ip(host: str) -> IPAddress | None:
    """`host` as an address, in any spelling the resolver accepts, else None (a name)."""
    bare = host.strip("[]")
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        if ":" in bare or not bare or not all(c.isalnum() or c == "." for c in bare):
            return None
        try:
            # inet_aton reads the legacy IPv4 forms getaddrinfo also accepts (decimal, hex, octal).
            ip = ipaddress.IPv4Address(socket.inet_aton(bare))
        except OSError:
            return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def endpoint_problem(
    url: str, allow_private: bool, platform: Platform, *, field: str, allow_field: str, local_private: bool
) -> str | None:
    """Why `url` (the value of `field`) may not be used, else None.

    `local_private`: on the local platform, loopback and private endpoints also need `allow_field`
    (an MCPServerEntry's rule); else the local platform refuses only link-local and metadata
    endpoints (an MCPRemoteProxy fronting a server of this machine is what the local platform is for).
    """
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    if not host:
        return f"{field}: no host"
    ip = host_ip(host)
    loopback = host == "localhost" or host.endswith(".localhost") or (ip is not None and ip.is_loopback)
    if host in ALWAYS_BLOCKED_HOSTS or (ip is not None and (str(ip) in METADATA_IPS or ip.is_link_local)):
        return f"{field}: link-local and cloud-metadata endpoints are refused"
    if platform == "kubernetes":
        if loopback or (ip is not None and ip.is_unspecified):
            return f"{field}: loopback endpoints are refused on Kubernetes"
        if host in KUBERNETES_API_HOSTS or host.startswith("kubernetes.default.svc."):
            return f"{field}: the Kubernetes API server is not an MCP endpoint"
    elif not local_private:
        return None
    private = loopback or host.endswith(".cluster.local") or (ip is not None and ip.is_private)
    if private and not allow_private:
        return f"{allow_field}: {host} is a private endpoint; set {allow_field.rsplit('.', 1)[-1]}: true to reach it"
    return None
