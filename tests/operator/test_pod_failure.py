"""The cause of an unready workload, read from its pods' container statuses (operator/pods.py).

The real-node tier proves it end to end (a package missing from the image's offline cache); kwok
pods never fail, so here the container statuses are the shapes the kubelet writes.
"""

from __future__ import annotations

from typing import Any

from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.platform.kubernetes.api import KubeApi, login_from
from mcpfleet.platform.kubernetes.observe import pod_failure


def _pod(*statuses: dict[str, Any], deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"containerStatuses": list(statuses)}}


def test_termination_message_wins() -> None:
    crash = {
        "name": "proxy",
        "ready": False,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s restarting"}},
        "lastState": {
            "terminated": {"exitCode": 0, "message": "package x (uvx://x) is not available offline\n"}
        },
    }
    assert pod_failure([_pod(crash)]) == "container proxy: package x (uvx://x) is not available offline"


def test_waiting_reasons_that_need_a_change() -> None:
    pull = {
        "name": "mcp",
        "ready": False,
        "state": {"waiting": {"reason": "ErrImageNeverPull", "message": 'image "a/b:1" is not present'}},
    }
    assert pod_failure([_pod(pull)]) == 'container mcp: ErrImageNeverPull: image "a/b:1" is not present'
    loop = {
        "name": "proxy",
        "ready": False,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 3}},
    }
    assert pod_failure([_pod(loop)]) == "container proxy: CrashLoopBackOff: exit code 3"


def test_starting_ready_or_deleted_pods_say_nothing() -> None:
    starting = {"name": "proxy", "ready": False, "state": {"waiting": {"reason": "ContainerCreating"}}}
    running = {"name": "proxy", "ready": False, "state": {"running": {}}}
    ready = {"name": "proxy", "ready": True, "lastState": {"terminated": {"message": "old news"}}}
    assert pod_failure([_pod(starting), _pod(running), _pod(ready)]) is None
    gone = {"name": "proxy", "ready": False, "lastState": {"terminated": {"message": "bye"}}}
    assert pod_failure([_pod(gone, deleting=True)]) is None


async def test_the_operator_client_lists_pods(dev_cluster: ClusterHandle, namespace: str) -> None:
    """operator/pods.py lists a workload's pods through the operator's own client (kwok's pods are
    Ready, so they name no cause)."""
    dev_cluster.kubectl(
        "-n", namespace, "create", "deployment", "web", "--image=registry.example/web:1", "--replicas=2"
    )
    dev_cluster.kubectl("-n", namespace, "rollout", "status", "deployment/web", "--timeout=60s")
    api = KubeApi(login_from(str(dev_cluster.kubeconfig)))
    try:
        pods = await api.list("v1", "Pod", namespace, labels={"app": "web"})
    finally:
        await api.close()
    assert len(pods) == 2 and all(p["kind"] == "Pod" for p in pods)
    assert pod_failure(pods) is None
