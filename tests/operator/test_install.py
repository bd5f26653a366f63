"""`kubectl apply -k deploy/` on the dev cluster: CRDs, namespace, RBAC and the operator Deployment,
whose pod turns Ready through kwok."""

from __future__ import annotations

from pathlib import Path

from mcpfleet.devcluster.handle import ClusterHandle

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SA = "system:serviceaccount:mcpfleet-system:mcpfleet-operator"


def test_kustomize_install_brings_the_operator_up(
    dev_cluster: ClusterHandle, crds_installed: list[str]
) -> None:
    rendered = dev_cluster.kubectl("kustomize", str(DEPLOY)).stdout
    assert rendered.count("kind: CustomResourceDefinition") == 7
    dev_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(DEPLOY))
    dev_cluster.kubectl(
        "wait",
        "-n",
        "mcpfleet-system",
        "--for=condition=Available",
        "deployment/mcpfleet-operator",
        "--timeout=90s",
    )
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
    ]
    denied = [
        ("get", "secrets", "-n", "default"),
        ("create", "pods", "-n", "default"),
        ("delete", "mcpservers.mcpfleet.dev", "-n", "default"),
        ("create", "clusterroles.rbac.authorization.k8s.io"),
    ]
    for args in allowed:
        result = dev_cluster.kubectl("auth", "can-i", *args, f"--as={SA}", check=False)
        assert result.stdout.strip() == "yes", args
    for args in denied:
        result = dev_cluster.kubectl("auth", "can-i", *args, f"--as={SA}", check=False)
        assert result.stdout.strip() == "no", args
