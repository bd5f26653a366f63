"""Discovered mode and the status writer against the dev Kubernetes control plane."""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.types import PatchType
from mcp.client.client import Client

from mcpfleet.vmcp.app import VMCPApp
from mcpfleet.vmcp.backends import KubernetesBackendSource
from mcpfleet.vmcp.config import parse_config
from mcpfleet.vmcp.gateway import Gateway
from mcpfleet.vmcp.status import KubernetesStatusWriter
from tests.vmcp.servers import sdk_backend
from tests.waiting import wait_until

G, V = "mcpfleet.dev", "v1alpha1"
MCPServer = create_namespaced_resource(G, V, "MCPServer", "mcpservers")
MCPRemoteProxy = create_namespaced_resource(G, V, "MCPRemoteProxy", "mcpremoteproxies")
VirtualMCPServer = create_namespaced_resource(G, V, "VirtualMCPServer", "virtualmcpservers")


async def _server(client: AsyncClient, ns: str, name: str, group: str | None, url: str | None) -> None:
    spec: dict[str, Any] = {"image": "example.org/unused:1"}
    if group:
        spec["groupRef"] = group
    await client.create(
        MCPServer(
            {
                "apiVersion": f"{G}/{V}",
                "kind": "MCPServer",
                "metadata": {"name": name, "namespace": ns},
                "spec": spec,
            }
        )
    )
    if url:
        await _set_url(client, MCPServer, ns, name, url)


async def _set_url(client: AsyncClient, res: Any, ns: str, name: str, url: str) -> None:
    await client.patch(res.Status, name, {"status": {"url": url}}, namespace=ns, patch_type=PatchType.MERGE)


async def _tools(url: str) -> set[str]:
    async with Client(url, mode="legacy") as c:
        return {t.name for t in (await c.list_tools()).tools}


async def test_discovered_backends_followed_live_and_status_written(
    dev_cluster: Any, crds_installed: list[str], namespace: str, served: Any
) -> None:
    client = AsyncClient(config=KubeConfig.from_file(str(dev_cluster.kubeconfig)))
    a = await served(sdk_backend("alpha").streamable_http_app())
    b = await served(sdk_backend("beta").streamable_http_app())
    c = await served(sdk_backend("gamma").streamable_http_app())
    await _server(client, namespace, "alpha", "team", a.url)
    await _server(client, namespace, "beta", "team", None)  # not serving yet: no status.url
    await _server(client, namespace, "other", "another-group", c.url)
    await client.create(
        VirtualMCPServer(
            {
                "apiVersion": f"{G}/{V}",
                "kind": "VirtualMCPServer",
                "metadata": {"name": "gw", "namespace": namespace},
                "spec": {"config": {"groupRef": "team"}, "incomingAuth": {"type": "anonymous"}},
            }
        )
    )
    cfg = parse_config(
        {
            "name": "gw",
            "groupRef": "team",
            "namespace": namespace,
            "operational": {"failureHandling": {"statusReportingInterval": "1s"}},
        }
    )
    gw = Gateway(
        cfg,
        KubernetesBackendSource("team", namespace, client),
        status_writer=KubernetesStatusWriter("gw", namespace, client),
    )
    s = await served(VMCPApp(gw))

    assert await _tools(s.url) >= {"alpha_echo", "alpha_alpha_only"}
    assert not any(t.startswith(("beta_", "other_")) for t in await _tools(s.url))

    # beta gets its URL: it is added without a restart.
    await _set_url(client, MCPServer, namespace, "beta", b.url)
    await wait_until(lambda: _has(s.url, "beta_echo"), "beta_echo listed", within=15, interval=0.2)

    # alpha's URL changes to gamma's server: calls follow the new URL.
    await _set_url(client, MCPServer, namespace, "alpha", c.url)
    await wait_until(
        lambda: _has(s.url, "alpha_gamma_only"), "alpha_gamma_only listed", within=15, interval=0.2
    )
    async with Client(s.url, mode="legacy") as cl:
        res = await cl.call_tool("alpha_echo", {"text": "k"})
        assert res.content[0].text == "gamma:k"  # type: ignore[union-attr]

    # A remote proxy in the group is a backend too; deleting beta removes it.
    await client.create(
        MCPRemoteProxy(
            {
                "apiVersion": f"{G}/{V}",
                "kind": "MCPRemoteProxy",
                "metadata": {"name": "remote", "namespace": namespace},
                "spec": {"remoteURL": "https://example.org/mcp", "groupRef": "team"},
            }
        )
    )
    await _set_url(client, MCPRemoteProxy, namespace, "remote", a.url)
    await wait_until(lambda: _has(s.url, "remote_echo"), "remote_echo listed", within=15, interval=0.2)
    await client.delete(MCPServer, "beta", namespace=namespace)
    await wait_until(lambda: _lacks(s.url, "beta_echo"), "beta_echo gone", within=15, interval=0.2)

    # The gateway reported its backends and counts into the VirtualMCPServer status.
    async def reported() -> dict[str, Any] | None:
        obj = await client.get(VirtualMCPServer, "gw", namespace=namespace)
        st = obj.status or {}
        names = {d["name"] for d in st.get("discoveredBackends", [])}
        return st if names == {"alpha", "remote"} and st.get("toolCount") else None

    st = await wait_until(reported, "the backends in the status", within=15, interval=0.2)
    assert st["backendCount"] == 2
    assert st["toolCount"] == len(await _tools(s.url))
    assert all(d["status"] == "healthy" and d["url"] for d in st["discoveredBackends"])
    await gw.stop()
    await client.close()


async def _has(url: str, tool: str) -> bool:
    return tool in await _tools(url)


async def _lacks(url: str, tool: str) -> bool:
    return tool not in await _tools(url)
