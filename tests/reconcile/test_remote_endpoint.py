"""MCPRemoteProxy `allowPrivateEndpoint` (ToolHive's rule on remoteURL): on Kubernetes loopback,
link-local, cloud-metadata and kubernetes.default upstreams are refused whatever the field says, private
ones (RFC 1918, unique-local, *.cluster.local) only with it; locally the proxy may front this machine's
servers, link-local and metadata still refused. Every spelling of an address gets its verdict."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpfleet.api.mcpremoteproxy import MCPRemoteProxy
from mcpfleet.reconcile import mcpremoteproxy
from mcpfleet.reconcile.endpoints import host_ip
from mcpfleet.reconcile.model import World

from .conftest import obj

KUBE = World(platform="kubernetes", namespace="team")
LOCAL = World(platform="local", namespace="team")


def _proxy(url: str, allow: bool | None = None) -> MCPRemoteProxy:
    extra = "" if allow is None else f", allowPrivateEndpoint: {str(allow).lower()}"
    proxy = obj(f"kind: MCPRemoteProxy\nmetadata: {{name: r}}\nspec: {{remoteURL: '{url}'{extra}}}")
    assert isinstance(proxy, MCPRemoteProxy)
    return proxy


def _endpoint_problems(url: str, world: World, allow: bool | None = None) -> list[str]:
    plan = mcpremoteproxy.plan(_proxy(url, allow), world)
    return [p for p in plan.problems if "endpoint" in p or "Kubernetes API" in p]


ALWAYS = [
    "http://127.0.0.1:8080/mcp",
    "http://localhost/mcp",
    "http://169.254.169.254/latest",
    "http://[fd00:ec2::254]/x",
    "http://metadata.google.internal/x",
    "https://kubernetes.default.svc/api",
    "https://kubernetes.default.svc.cluster.local/api",
    "http://2130706433/mcp",  # 127.0.0.1 in decimal
    "http://0x7f.1/mcp",
    "http://[::ffff:127.0.0.1]/mcp",
    "http://0.0.0.0/mcp",
]
PRIVATE = [
    "http://10.0.0.5/mcp",
    "http://172.20.1.1/mcp",
    "http://192.168.1.10/mcp",
    "http://[fd12:3456::1]/mcp",
    "http://mcp-time.team.svc.cluster.local:8080/mcp",
    "http://167772165/mcp",  # 10.0.0.5 in decimal
]
PUBLIC = ["https://mcp.example.com/mcp", "http://mcp-time.team.svc:8080/mcp", "https://8.8.8.8/mcp"]


@pytest.mark.parametrize("url", ALWAYS)
def test_always_refused_on_kubernetes(url: str) -> None:
    (problem,) = _endpoint_problems(url, KUBE, allow=True)
    assert problem.startswith("spec.remoteURL: ")


@pytest.mark.parametrize("url", PRIVATE)
def test_private_needs_the_field_on_kubernetes(url: str) -> None:
    (problem,) = _endpoint_problems(url, KUBE)
    assert problem.startswith("spec.allowPrivateEndpoint: ") and "allowPrivateEndpoint: true" in problem
    assert _endpoint_problems(url, KUBE, allow=True) == []


@pytest.mark.parametrize("url", PUBLIC)
def test_public_and_bare_service_names_pass(url: str) -> None:
    assert _endpoint_problems(url, KUBE) == []


def test_local_platform_fronts_this_machine() -> None:
    assert _endpoint_problems("http://127.0.0.1:9/mcp", LOCAL) == []
    assert _endpoint_problems("http://10.0.0.5/mcp", LOCAL) == []
    (problem,) = _endpoint_problems("http://169.254.169.254/x", LOCAL)
    assert "cloud-metadata" in problem


@given(st.ip_addresses(v=4))
def test_every_ipv4_spelling_gets_the_same_verdict(ip: ipaddress.IPv4Address) -> None:
    def verdict(host: str) -> list[str]:
        # The field named and the kind of refusal; the host is quoted as written.
        return [p.replace(host.strip("[]"), "HOST") for p in _endpoint_problems(f"http://{host}/mcp", KUBE)]

    assert verdict(str(int(ip))) == verdict(str(ip)) == verdict(f"[::ffff:{ip}]")
    assert host_ip(str(int(ip))) == ip and host_ip(f"[::ffff:{ip}]") == ip
