"""The controller in-process against the real API server: a status write based on a stale object gets
409 and is retried by re-reading (never overwriting); a resync re-list drops objects whose deletion
the watch missed. The store is seeded with an old version or a ghost."""

from __future__ import annotations

import asyncio

from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.operator.controller import Controller
from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.operator.store import Store
from mcpfleet.platform.kubernetes.api import KubeApi, login_from

from .conftest import Kube


async def test_conflict_is_retried_by_rereading(dev_cluster: ClusterHandle, kube: Kube) -> None:
    kube.apply(
        "apiVersion: mcpfleet.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: c}\nspec: {image: 'uvx://c'}\n"
    )
    stale = kube.get("MCPServer", "c")
    assert stale is not None
    # Someone else writes the object after we read it: our copy is now stale.
    dev_cluster.kubectl(
        "patch", "-n", kube.ns, "mcpservers", "c", "--subresource=status", "--type=merge",
        "-p", '{"status": {"message": "written by someone else"}}',
    )  # fmt: skip
    api = KubeApi(login_from(str(dev_cluster.kubeconfig)))
    settings = OperatorSettings(namespaces=(kube.ns,), workers=1, metrics_port=None)
    controller = Controller(api, Store(), settings)
    controller.on_object("ADDED", stale)
    task = asyncio.create_task(controller.run())
    try:
        for _ in range(200):
            await asyncio.sleep(0.05)
            if controller.queue.idle and controller.stats.reconciles[("MCPServer", kube.ns, "c")] >= 2:
                break
        assert controller.stats.conflicts == 1
        assert api.requests[("get", "MCPServer")] == 1  # the re-read
        status = kube.status("MCPServer", "c")
        # The second pass computed the status from the fresh object and wrote it.
        assert status["phase"] in ("Pending", "Running") and status["observedGeneration"] == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()


async def test_relist_drops_objects_deleted_behind_the_watch(dev_cluster: ClusterHandle, kube: Kube) -> None:
    kube.apply(
        "apiVersion: mcpfleet.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: real}\nspec: {image: 'uvx://r'}\n"
    )
    real = kube.get("MCPServer", "real")
    assert real is not None
    # An object whose deletion the watch never delivered.
    ghost = {
        **real,
        "metadata": {**real["metadata"], "name": "ghost", "uid": "ghost-uid", "resourceVersion": "1"},
    }
    api = KubeApi(login_from(str(dev_cluster.kubeconfig)))
    controller = Controller(api, Store(), OperatorSettings(namespaces=(kube.ns,), metrics_port=None))
    try:
        controller.on_object("ADDED", ghost)
        await controller.relist()
        assert controller.store.get(("MCPServer", kube.ns, "ghost")) is None
        assert controller.store.get(("MCPServer", kube.ns, "real")) is not None
        assert ("MCPServer", kube.ns, "real") in controller.store.keys()
        assert api.writes == 0
    finally:
        await api.close()
