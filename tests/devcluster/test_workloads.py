"""Workloads on the dev cluster: Deployments become ready, owners' deletion garbage-collects children."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.devcluster.build import KUBE_VERSION
from mcpfleet.devcluster.handle import ClusterHandle


def _deployment(name: str, replicas: int) -> str:
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "main", "image": "example.invalid/server:1"}]},
                },
            },
        }
    )


def _ready_replicas(cluster: ClusterHandle, ns: str, name: str) -> int:
    dep = cluster.get_json(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}")
    assert dep is not None
    ready: int = dep.get("status", {}).get("readyReplicas", 0)
    return ready


def _wait(cluster: ClusterHandle, ns: str, what: str, check: Callable[[], bool]) -> None:
    # Generous: the machine is shared and often loaded; on timeout the message shows pods/events.
    cluster.wait_for(what, check, timeout=90, namespace=ns)


def _items(cluster: ClusterHandle, path: str) -> list[dict[str, Any]]:
    data = cluster.get_json(path)
    assert data is not None
    items: list[dict[str, Any]] = data["items"]
    return items


def test_server_reports_the_built_version(dev_cluster: ClusterHandle) -> None:
    version = dev_cluster.get_json("/version")
    assert version is not None and version["gitVersion"] == KUBE_VERSION
    client = json.loads(dev_cluster.kubectl("version", "--client", "-o", "json").stdout)
    assert client["clientVersion"]["gitVersion"] == KUBE_VERSION


def test_fake_nodes_are_ready_and_untainted(dev_cluster: ClusterHandle) -> None:
    nodes = _items(dev_cluster, "/api/v1/nodes")
    assert len(nodes) >= 3
    for node in nodes:
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", node["metadata"]["name"]
        assert not node["spec"].get("taints"), node["spec"].get("taints")


def test_namespace_fixture_gives_a_fresh_namespace(dev_cluster: ClusterHandle, namespace: str) -> None:
    ns = dev_cluster.get_json(f"/api/v1/namespaces/{namespace}")
    assert ns is not None and ns["status"]["phase"] == "Active"
    assert ns["metadata"]["labels"]["mcpfleet.dev/test"] == "true"
    assert dev_cluster.get_json(f"/api/v1/namespaces/{namespace}/serviceaccounts/default") is not None
    assert _items(dev_cluster, f"/apis/apps/v1/namespaces/{namespace}/deployments") == []


def test_deployment_reaches_ready_replicas(dev_cluster: ClusterHandle, namespace: str) -> None:
    dev_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_deployment("web", 3))
    _wait(
        dev_cluster,
        namespace,
        "readyReplicas == 3",
        lambda: _ready_replicas(dev_cluster, namespace, "web") == 3,
    )

    dep = dev_cluster.get_json(f"/apis/apps/v1/namespaces/{namespace}/deployments/web")
    assert dep is not None
    assert dep["status"]["readyReplicas"] == dep["spec"]["replicas"] == 3
    pods = _items(dev_cluster, f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3Dweb")
    assert len(pods) == 3
    for pod in pods:
        # Scheduled by kube-scheduler onto a kwok node, then played Running/Ready by kwok.
        assert pod["spec"]["nodeName"].startswith("kwok-node-")
        assert pod["status"]["phase"] == "Running"
        assert pod["status"].get("podIP")
        ready = [c for c in pod["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True"


def test_scaling_a_deployment_follows(dev_cluster: ClusterHandle, namespace: str) -> None:
    dev_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_deployment("scaled", 1))
    _wait(dev_cluster, namespace, "1 ready", lambda: _ready_replicas(dev_cluster, namespace, "scaled") == 1)
    dev_cluster.kubectl("scale", "-n", namespace, "deployment/scaled", "--replicas=4")
    _wait(dev_cluster, namespace, "4 ready", lambda: _ready_replicas(dev_cluster, namespace, "scaled") == 4)
    dev_cluster.kubectl("scale", "-n", namespace, "deployment/scaled", "--replicas=2")
    _wait(
        dev_cluster,
        namespace,
        "2 pods left",
        lambda: (
            len(_items(dev_cluster, f"/api/v1/namespaces/{namespace}/pods?labelSelector=app%3Dscaled")) == 2
        ),
    )


def test_deleting_a_deployment_garbage_collects_replicasets_and_pods(
    dev_cluster: ClusterHandle, namespace: str
) -> None:
    dev_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_deployment("gc", 2))
    _wait(
        dev_cluster,
        namespace,
        "readyReplicas == 2",
        lambda: _ready_replicas(dev_cluster, namespace, "gc") == 2,
    )
    rs = _items(dev_cluster, f"/apis/apps/v1/namespaces/{namespace}/replicasets")
    assert len(rs) == 1 and rs[0]["metadata"]["ownerReferences"][0]["kind"] == "Deployment"

    # Background propagation: the apiserver deletes only the Deployment; the garbage collector in
    # kube-controller-manager must remove the ReplicaSet, and kwok completes the pods' deletion.
    dev_cluster.kubectl("delete", "-n", namespace, "deployment/gc", "--cascade=background", "--wait=false")
    _wait(
        dev_cluster,
        namespace,
        "replicasets collected",
        lambda: _items(dev_cluster, f"/apis/apps/v1/namespaces/{namespace}/replicasets") == [],
    )
    _wait(
        dev_cluster,
        namespace,
        "pods collected",
        lambda: _items(dev_cluster, f"/api/v1/namespaces/{namespace}/pods") == [],
    )


def test_owner_reference_on_any_object_is_garbage_collected(
    dev_cluster: ClusterHandle, namespace: str
) -> None:
    owner = json.loads(
        dev_cluster.kubectl(
            "create", "-n", namespace, "configmap", "owner", "--from-literal=a=b", "-o", "json"
        ).stdout
    )
    child = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "child",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
            ],
        },
        "data": {"x": "y"},
    }
    dev_cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(child))
    dev_cluster.kubectl("delete", "-n", namespace, "configmap/owner", "--wait=false")
    _wait(
        dev_cluster,
        namespace,
        "child collected",
        lambda: dev_cluster.get_json(f"/api/v1/namespaces/{namespace}/configmaps/child") is None,
    )


def _crd(group: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer", "minimum": 1}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


def test_apply_crds_waits_for_established(dev_cluster: ClusterHandle, namespace: str, tmp_path: Path) -> None:
    group = f"{namespace}.devcluster.test"
    (tmp_path / "widgets.yaml").write_text(json.dumps(_crd(group)))
    try:
        names = dev_cluster.apply_crds(tmp_path)
        assert names == [f"widgets.{group}"]
        crd = dev_cluster.get_json(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}")
        assert crd is not None
        established = [c for c in crd["status"]["conditions"] if c["type"] == "Established"]
        assert established[0]["status"] == "True"
        # Served immediately, with schema validation by the real apiserver.
        widget = {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 2},
        }
        dev_cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(widget))
        bad = widget | {"metadata": {"name": "bad"}, "spec": {"size": 0}}
        proc = dev_cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(bad), check=False)
        assert proc.returncode != 0 and "spec.size" in proc.stderr
    finally:
        dev_cluster.kubectl("delete", "crd", f"widgets.{group}", "--wait=false", check=False)


def test_apply_crds_on_an_empty_dir_fails_clearly(dev_cluster: ClusterHandle, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no CRD manifests"):
        dev_cluster.apply_crds(tmp_path)
