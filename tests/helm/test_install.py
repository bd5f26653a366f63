"""Both charts on the dev cluster with the built Helm: install, the operator reconciling an MCPServer to
Ready with the chart's RBAC, `helm upgrade` rolling the operator, and `helm uninstall` removing what it
installed (the CRDs kept).

The dev cluster's nodes are kwok's: the chart's operator pods turn Ready without running. So the
operator runs here, out of cluster, authenticated as the chart's ServiceAccount (a TokenRequest token):
every call it makes is allowed or denied by the chart's ClusterRole and leader-election Role.

The CRDs are shared with every other test of the session (`crds_installed`, server-side applied): the
CRD chart adopts them with --take-ownership (same generated content, so nothing changes) and, by its
keep policy, leaves them in place on uninstall. The test checks that policy in the release's stored
manifest before uninstalling, so a broken chart fails here instead of deleting the CRDs of the cluster.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcpfleet.devcluster.handle import ClusterHandle
from tests.conftest import CRDS_DIR
from tests.operator.conftest import Kube, OperatorProcess
from tests.operator.test_mcpserver import SERVER

from .conftest import CRDS_CHART, OPERATOR_CHART, Helm

KEEP = "helm.sh/resource-policy"


def release_manifest(helm: Helm, release: str, namespace: str) -> list[dict[str, Any]]:
    out = helm.run("get", "manifest", release, "--namespace", namespace).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def crd(cluster: ClusterHandle, name: str) -> dict[str, Any] | None:
    return cluster.get_json(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")


def established(obj: dict[str, Any] | None) -> bool:
    conditions = (obj or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def test_crds_chart_adopts_upgrades_and_keeps_the_crds(
    helm_on_cluster: Helm, dev_cluster: ClusterHandle, crds_installed: list[str], namespace: str
) -> None:
    helm = helm_on_cluster
    release = f"mcpfleet-crds-{secrets.token_hex(3)}"
    dev_cluster.use_shipped_conversion_clients(CRDS_DIR)
    try:
        helm.run(
            "install", release, str(CRDS_CHART), "--namespace", namespace,
            "--take-ownership", "--wait", "--timeout", "120s",
        )  # fmt: skip
        for name in crds_installed:
            obj = crd(dev_cluster, name)
            assert obj is not None and established(obj), name
            annotations = obj["metadata"]["annotations"]
            assert annotations["meta.helm.sh/release-name"] == release, name
            assert annotations[KEEP] == "keep", name
            assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm", name

        # helm upgrade updates the CRDs in place (they are templates, not crds/): here a label.
        helm.run(
            "upgrade", release, str(CRDS_CHART), "--namespace", namespace, "--set", "labels.upgraded=yes"
        )
        for name in crds_installed:
            obj = crd(dev_cluster, name)
            assert obj is not None and obj["metadata"]["labels"].get("upgraded") == "yes", name

        # Never uninstall a release whose stored manifest would delete the cluster's CRDs.
        manifest = release_manifest(helm, release, namespace)
        assert sorted(o["metadata"]["name"] for o in manifest) == sorted(crds_installed)
        unkept = [
            o["metadata"]["name"]
            for o in manifest
            if o["metadata"].get("annotations", {}).get(KEEP) != "keep"
        ]
        assert not unkept, f"refusing to uninstall: these CRDs would be deleted: {unkept}"
        result = helm.run("uninstall", release, "--namespace", namespace, "--wait")
        assert "kept due to the resource policy" in result.stdout + result.stderr
        assert helm.run("list", "--namespace", namespace, "--short").stdout.strip() == ""
        for name in crds_installed:
            assert established(crd(dev_cluster, name)), f"{name} was not kept"
    finally:
        # The chart's CRDs convert through the operator's Service, which a kwok cluster cannot
        # serve: point them back at the dev control plane's conversion webhook.
        dev_cluster.apply_crds(CRDS_DIR)


def service_account_kubeconfig(cluster: ClusterHandle, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig with a short-lived token of `account` (TokenRequest) for the dev cluster."""
    token = cluster.kubectl(
        "create", "token", account, "--namespace", namespace, "--duration=1h"
    ).stdout.strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    server = admin["clusters"][0]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [server],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": server["name"], "user": account}}],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def owned_replica_sets(
    cluster: ClusterHandle, namespace: str, deployment: dict[str, Any]
) -> list[dict[str, Any]]:
    data = cluster.get_json(f"/apis/apps/v1/namespaces/{namespace}/replicasets") or {}
    uid = deployment["metadata"]["uid"]
    return [
        rs
        for rs in data.get("items", [])
        if any(o["uid"] == uid for o in rs["metadata"].get("ownerReferences", []))
    ]


@pytest.fixture
def operator_release(helm_on_cluster: Helm, namespace: str) -> Iterator[str]:
    """A release name for the operator chart (its objects' names); uninstalled if a test left it, so
    that its cluster-scoped ClusterRole and binding do not outlive the test's namespace."""
    release = f"mcpfleet-operator-{secrets.token_hex(3)}"
    yield release
    helm_on_cluster.run("uninstall", release, "--namespace", namespace, "--ignore-not-found", check=False)


def test_operator_chart_installs_reconciles_upgrades_and_uninstalls(
    helm_on_cluster: Helm,
    dev_cluster: ClusterHandle,
    crds_installed: list[str],
    namespace: str,
    operator_release: str,
    tmp_path: Path,
) -> None:
    helm = helm_on_cluster
    release = operator_release
    ns = namespace
    deployment_path = f"/apis/apps/v1/namespaces/{ns}/deployments/{release}"
    helm.run("install", release, str(OPERATOR_CHART), "--namespace", ns, "--wait", "--timeout", "120s")
    deployment = dev_cluster.get_json(deployment_path)
    assert deployment is not None and deployment["status"].get("readyReplicas") == 2
    assert "--leader-elect" in deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    service = dev_cluster.get_json(f"/api/v1/namespaces/{ns}/services/{release}-metrics")
    assert service is not None and service["spec"]["ports"][0]["port"] == 8080

    # The chart's RBAC, as the API server sees it for the chart's ServiceAccount.
    subject = f"--as=system:serviceaccount:{ns}:{release}"
    for args, expected in [
        (("create", "deployments.apps", "-n", "default"), "yes"),
        (("patch", "mcpservers.mcpfleet.dev/status", "-n", "default"), "yes"),
        (("update", f"leases.coordination.k8s.io/{release}", "-n", ns), "yes"),
        (("update", "leases.coordination.k8s.io/mcpfleet-operator", "-n", ns), "no"),
        (("get", "secrets", "-n", "default"), "no"),
        (("create", "clusterroles.rbac.authorization.k8s.io"), "no"),
    ]:
        answer = dev_cluster.kubectl("auth", "can-i", *args, subject, check=False).stdout.strip()
        assert answer == expected, (args, answer)

    # The operator, authenticated as that ServiceAccount, with the chart's Lease, reconciles to Ready.
    kubeconfig = service_account_kubeconfig(dev_cluster, ns, release, tmp_path / "operator.kubeconfig")
    operator = OperatorProcess(
        dev_cluster,
        [ns],
        tmp_path / "operator.log",
        kubeconfig=kubeconfig,
        extra_args=("--leader-elect", "--leader-election-namespace", ns, "--leader-election-id", release),
    )
    kube = Kube(dev_cluster, ns)
    operator.start()
    try:
        kube.apply(SERVER)
        status = kube.wait_phase("MCPServer", "time", "Running")
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True", status
        lease = dev_cluster.get_json(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{release}")
        assert lease is not None and lease["spec"].get("holderIdentity"), lease
        kube.delete("MCPServer", "time")
        kube.wait_gone("MCPServer", "time")
    finally:
        operator.stop()
    assert "403" not in operator.log_tail(400), operator.log_tail()

    # An upgrade that leaves the pod template alone does not roll the operator ...
    before = dev_cluster.get_json(deployment_path)
    assert before is not None
    helm.run(
        "upgrade", release, str(OPERATOR_CHART), "--namespace", ns, "--reuse-values",
        "--set-string", "metrics.service.annotations.prometheus\\.io/scrape=true", "--wait", "--timeout", "120s",
    )  # fmt: skip
    unchanged = dev_cluster.get_json(deployment_path)
    assert unchanged is not None and unchanged["metadata"]["generation"] == before["metadata"]["generation"]
    assert len(owned_replica_sets(dev_cluster, ns, before)) == 1

    # ... one that changes it rolls it: a new ReplicaSet takes the replicas over.
    helm.run(
        "upgrade", release, str(OPERATOR_CHART), "--namespace", ns, "--reuse-values",
        "--set", "logLevel=debug", "--wait", "--timeout", "120s",
    )  # fmt: skip
    dev_cluster.kubectl("rollout", "status", "-n", ns, f"deployment/{release}", "--timeout=120s")
    after = dev_cluster.get_json(deployment_path)
    assert after is not None and after["metadata"]["generation"] > before["metadata"]["generation"]
    env = {e["name"]: e.get("value") for e in after["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["MCPFLEET_LOG_LEVEL"] == "debug"
    replica_sets = owned_replica_sets(dev_cluster, ns, after)
    assert len(replica_sets) == 2, [rs["metadata"]["name"] for rs in replica_sets]
    revision = "deployment.kubernetes.io/revision"
    newest = max(replica_sets, key=lambda rs: int(rs["metadata"]["annotations"][revision]))
    oldest = min(replica_sets, key=lambda rs: int(rs["metadata"]["annotations"][revision]))
    assert newest["status"].get("readyReplicas") == 2 and oldest["spec"]["replicas"] == 0
    assert helm.run("history", release, "--namespace", ns, "--max", "10").stdout.count("\n") == 4

    # helm uninstall removes every object it installed, the cluster-scoped ones too.
    installed = release_manifest(helm, release, ns)
    assert {o["kind"] for o in installed} == {
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "Deployment"
    }  # fmt: skip
    helm.run("uninstall", release, "--namespace", ns, "--wait", "--timeout", "120s")
    for obj in installed:
        kind, name = obj["kind"].lower(), obj["metadata"]["name"]
        scope = [] if kind.startswith("cluster") else ["-n", ns]
        result = dev_cluster.kubectl("get", kind, name, *scope, "--ignore-not-found", "-o", "name")
        assert result.stdout.strip() == "", f"{kind}/{name} survived helm uninstall"
