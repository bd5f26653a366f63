"""The kubernetes (label discovery) and configMap sources against the dev cluster's real API server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from lightkube import AsyncClient, KubeConfig

from mcpfleet.registry.sources.kubernetes import (
    KubernetesWorkloads,
    Workload,
    WorkloadReader,
    workload_entry,
)
from tests.reference import TOOLHIVE_FILE
from tests.registry.conftest import make_config, running
from tests.registry.schemas import server_schema
from tests.waiting import wait_until

OBJECTS = """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: alpha, labels: {mcpfleet.dev/registry: test}}
spec: {image: "uvx://mcp-server-time", transport: stdio}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: other-registry, labels: {mcpfleet.dev/registry: someone-else}}
spec: {image: "uvx://mcp-server-time", transport: stdio}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: unlabelled}
spec: {image: "uvx://mcp-server-time", transport: stdio}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: not-running-yet, labels: {mcpfleet.dev/registry: test}}
spec: {image: "uvx://mcp-server-time", transport: stdio}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPRemoteProxy
metadata: {name: beta, labels: {mcpfleet.dev/registry: test}}
spec: {remoteURL: "https://mcp.example.com/mcp", transport: streamable-http}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: VirtualMCPServer
metadata: {name: gamma, labels: {mcpfleet.dev/registry: test}}
spec: {config: {groupRef: g}, incomingAuth: {type: anonymous}}
"""


def client_factory(cluster: Any) -> Callable[[], AsyncClient]:
    return lambda: AsyncClient(config=KubeConfig.from_file(cluster.kubeconfig))


def set_url(cluster: Any, namespace: str, kind: str, name: str, url: str) -> None:
    patch = json.dumps({"status": {"url": url}})
    cluster.kubectl("patch", kind, name, "-n", namespace, "--subresource=status", "--type=merge", "-p", patch)


@pytest.mark.cluster
async def test_kubernetes_source_discovers_labelled_workloads(
    dev_cluster: Any, crds_installed: list[str], namespace: str, tmp_path: Path
) -> None:
    dev_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=OBJECTS)
    for kind, name in (
        ("mcpserver", "alpha"),
        ("mcpserver", "other-registry"),
        ("mcpserver", "unlabelled"),
        ("mcpremoteproxy", "beta"),
        ("virtualmcpserver", "gamma"),
    ):
        set_url(dev_cluster, namespace, kind, name, f"http://{name}.{namespace}.svc:8080/mcp")
    cfg = make_config(
        [{"name": "k8s", "kubernetes": {"namespaces": [namespace]}}],
        f"sqlite+aiosqlite:///{tmp_path / 'k.db'}",
    )
    async with running(cfg, tmp_path, kube_client=client_factory(dev_cluster)) as h:
        await h.sync()
        status = (await h.get("/status")).json()["sources"][0]
        assert status["lastError"] is None, status
        doc = (await h.get("/v0.1/servers")).json()
        prefix = f"dev.mcpfleet.k8s.{namespace}/"
        assert [s["server"]["name"] for s in doc["servers"]] == [
            prefix + n for n in ("alpha", "beta", "gamma")
        ]
        for item in doc["servers"]:
            server = item["server"]
            assert not list(server_schema().iter_errors(server))
            name = server["name"].split("/")[1]
            assert server["remotes"] == [
                {"type": "streamable-http", "url": f"http://{name}.{namespace}.svc:8080/mcp"}
            ]
        # a workload that starts running appears; one that is deleted disappears
        set_url(dev_cluster, namespace, "mcpserver", "not-running-yet", "http://late:8080/mcp")
        dev_cluster.kubectl("delete", "mcpserver", "alpha", "-n", namespace, "--wait=true")
        await h.service.syncer.sync_source("k8s")
        names = [s["server"]["name"] for s in (await h.get("/v0.1/servers")).json()["servers"]]
        assert names == [prefix + n for n in ("beta", "gamma", "not-running-yet")]
        gone = quote(prefix + "alpha", safe="")
        assert (await h.get(f"/v0.1/servers/{gone}/versions/latest")).status_code == 404


@pytest.mark.cluster
async def test_kubernetes_source_watches_so_a_workload_that_starts_running_is_synced_at_once(
    dev_cluster: Any, crds_installed: list[str], namespace: str
) -> None:
    """The reader's `watch` wakes the sync loop (registry/sync.py) on every change of a labelled
    object, so a server that gets its URL after the registry started does not wait for the interval."""
    dev_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=OBJECTS)
    source = KubernetesWorkloads("test", [namespace], client_factory(dev_cluster))
    reader = WorkloadReader("k8s", source)
    wakes: list[int] = []

    async def follow() -> None:
        async for _ in reader.watch():
            wakes.append(1)

    task = asyncio.create_task(follow())
    try:
        await wait_until(lambda: len(wakes) or None, "the watch reporting the existing objects", within=30)
        await asyncio.sleep(1.0)  # let the initial events settle
        before = len(wakes)
        set_url(dev_cluster, namespace, "mcpserver", "not-running-yet", "http://late:8080/mcp")
        await wait_until(lambda: len(wakes) > before or None, "a wake-up for the new URL", within=30)
        listed = {w.name for w in await source.workloads()}
        assert "not-running-yet" in listed, listed
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await reader.close()


@pytest.mark.cluster
async def test_configmap_source(
    dev_cluster: Any, crds_installed: list[str], namespace: str, tmp_path: Path
) -> None:
    dev_cluster.kubectl(
        "create", "configmap", "registry", "-n", namespace, f"--from-file=registry.json={TOOLHIVE_FILE}"
    )
    sources = [
        {
            "name": "cm",
            "format": "toolhive",
            "configMap": {"namespace": namespace, "name": "registry", "key": "registry.json"},
        },
        {
            "name": "missing-key",
            "configMap": {"namespace": namespace, "name": "registry", "key": "nope.json"},
        },
        {"name": "missing-cm", "configMap": {"namespace": namespace, "name": "absent", "key": "r.json"}},
    ]
    cfg = make_config(sources, f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
    async with running(cfg, tmp_path, kube_client=client_factory(dev_cluster)) as h:
        await h.sync()
        status = {s["name"]: s for s in (await h.get("/status")).json()["sources"]}
        assert status["cm"]["lastError"] is None and status["cm"]["entries"] == 102
        assert "no key 'nope.json'" in status["missing-key"]["lastError"]
        assert "absent" in status["missing-cm"]["lastError"]
        assert h.service.catalogue.active_count == 102
        # an edit of the ConfigMap is picked up at the next sync
        small = {
            "servers": {"only": {"image": "x/only:1.0.0", "description": "only one", "transport": "stdio"}}
        }
        patch = json.dumps({"data": {"registry.json": json.dumps(small)}})
        dev_cluster.kubectl("patch", "configmap", "registry", "-n", namespace, "--type=merge", "-p", patch)
        assert await h.service.syncer.sync_source("cm") == "applied"
        names = [s["server"]["name"] for s in (await h.get("/v0.1/servers")).json()["servers"]]
        assert names == ["io.github.stacklok/only"]


async def test_workload_source_interface_without_a_cluster(tmp_path: Path) -> None:
    """The local platform's path: any WorkloadSource feeds the same entries."""

    class Static:
        def __init__(self) -> None:
            self.items = [Workload("local", "time", "http://127.0.0.1:9001/mcp", "MCPServer", "Time tools")]

        async def workloads(self) -> list[Workload]:
            return list(self.items)

        async def close(self) -> None:
            return None

    static = Static()
    reader = WorkloadReader("k8s", static)
    first = await reader.fetch()
    parsed = first.parse()
    assert [e.name for e in parsed.entries] == ["dev.mcpfleet.k8s.local/time"]
    assert parsed.entries[0].server == workload_entry(static.items[0])
    assert parsed.entries[0].server["description"] == "Time tools"
    static.items = []
    assert (await reader.fetch()).content_hash != first.content_hash
    cfg = make_config(
        [{"name": "k8s", "kubernetes": {}}], f"sqlite+aiosqlite:///{tmp_path / 'w.db'}", name="local"
    )
    static.items = [Workload("local", "time", "http://127.0.0.1:9001/mcp", "MCPServer")]
    async with running(cfg, tmp_path, workloads=static) as h:
        await h.sync()
        doc = (await h.get("/v0.1/servers/dev.mcpfleet.k8s.local%2Ftime/versions/latest")).json()
        assert doc["server"]["remotes"][0]["url"] == "http://127.0.0.1:9001/mcp"
