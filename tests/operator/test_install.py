"""`kubectl apply -k deploy/` on the dev cluster: CRDs, namespace, RBAC and the operator Deployment
(two replicas with leader election), whose pods turn Ready through kwok."""

from __future__ import annotations

from pathlib import Path

from mcpfleet.api.kinds import ALL_KINDS
from mcpfleet.devcluster.handle import ClusterHandle
from tests.conftest import CRDS_DIR

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SA = "system:serviceaccount:mcpfleet-system:mcpfleet-operator"


def test_kustomize_install_brings_the_operator_up(
    dev_cluster: ClusterHandle, crds_installed: list[str]
) -> None:
    rendered = dev_cluster.kubectl("kustomize", str(DEPLOY)).stdout
    assert rendered.count("kind: CustomResourceDefinition") == len(ALL_KINDS)
    dev_cluster.use_shipped_conversion_clients(CRDS_DIR)
    dev_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(DEPLOY))
    try:
        _check_install(dev_cluster)
    finally:
        # deploy/'s CRDs convert through the operator's Service, which a kwok cluster cannot serve
        # (its pods are simulated): point them back at the dev control plane's conversion webhook.
        dev_cluster.apply_crds(CRDS_DIR)


def _check_install(dev_cluster: ClusterHandle) -> None:
    dev_cluster.kubectl(
        "wait",
        "-n",
        "mcpfleet-system",
        "--for=condition=Available",
        "deployment/mcpfleet-operator",
        "--timeout=90s",
    )
    deployment = dev_cluster.get_json(
        "/apis/apps/v1/namespaces/mcpfleet-system/deployments/mcpfleet-operator"
    )
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    assert "--leader-elect" in deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    pods = dev_cluster.kubectl(
        "get", "pods", "-n", "mcpfleet-system", "-l", "app.kubernetes.io/name=mcpfleet-operator",
        "-o", "jsonpath={.items[*].status.conditions[?(@.type=='Ready')].status}",
    ).stdout  # fmt: skip
    assert "True" in pods.split()
    # The ClusterRole grants what the operator does, and not more than that.
    allowed = [
        ("create", "deployments.apps", "-n", "default"),
        ("patch", "mcpservers.mcpfleet.dev/status", "-n", "default"),
        ("create", "roles.rbac.authorization.k8s.io", "-n", "default"),
        ("create", "events", "-n", "default"),
        ("list", "customresourcedefinitions.apiextensions.k8s.io"),
        # Leader election: its own Lease in its own namespace.
        ("create", "leases.coordination.k8s.io", "-n", "mcpfleet-system"),
        ("update", "leases.coordination.k8s.io/mcpfleet-operator", "-n", "mcpfleet-system"),
        ("get", "leases.coordination.k8s.io/mcpfleet-operator", "-n", "mcpfleet-system"),
    ]
    denied = [
        ("get", "secrets", "-n", "default"),
        ("create", "pods", "-n", "default"),
        ("delete", "mcpservers.mcpfleet.dev", "-n", "default"),
        ("create", "clusterroles.rbac.authorization.k8s.io"),
        ("update", "leases.coordination.k8s.io/kube-scheduler", "-n", "mcpfleet-system"),
        ("update", "leases.coordination.k8s.io", "-n", "default"),
        ("delete", "leases.coordination.k8s.io/mcpfleet-operator", "-n", "mcpfleet-system"),
    ]
    for args in allowed:
        result = dev_cluster.kubectl("auth", "can-i", *args, f"--as={SA}", check=False)
        assert result.stdout.strip() == "yes", args
    for args in denied:
        result = dev_cluster.kubectl("auth", "can-i", *args, f"--as={SA}", check=False)
        assert result.stdout.strip() == "no", args
