"""The Helm-installed operator (deploy/helm/mcpfleet-operator) runs on the real node and reconciles
an MCPServer to Ready there, answering a tool call (issue 18's "where the real node exists").

Runs last in the tier (file order): the kustomize-installed operator watches every namespace, so it
is scaled to 0 while the chart's operator (watching only this test's namespace, its own release
name, ServiceAccount, ClusterRole and Lease) does the work, and scaled back afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import REPO_ROOT
from tests.helm.conftest import Helm, helm_binary  # noqa: F401  (the session fixture)
from tests.realnode import workloads
from tests.realnode.conftest import PodClient, wait_ready

from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.devcluster.operator_install import DEPLOYMENT, NAMESPACE
from mcpfleet.devcluster.realnode import NODE_NAME

CHART = REPO_ROOT / "deploy" / "helm" / "mcpfleet-operator"


def _scale_installed_operator(k: ClusterHandle, replicas: int) -> None:
    k.kubectl("-n", NAMESPACE, "scale", f"deployment/{DEPLOYMENT}", f"--replicas={replicas}")
    if replicas:
        k.kubectl(
            "-n", NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}", "--timeout=180s", timeout=200
        )
    else:
        k.kubectl(
            "-n", NAMESPACE, "wait", "--for=delete", "pod", "-l", "app.kubernetes.io/name=mcpfleet-operator",
            "--timeout=90s", check=False, timeout=120,
        )  # fmt: skip


def test_helm_installed_operator_on_the_real_node(
    real_cluster: ClusterHandle,
    operator_installed: str,
    client: PodClient,
    rn_namespace: str,
    helm_binary: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    k, ns = real_cluster, rn_namespace
    repository, tag = operator_installed.rsplit(":", 1)
    helm = Helm(helm_binary, tmp_path / "helm-home", kubeconfig=k.kubeconfig)
    release, release_ns = "rn-helm", "rn-helm-system"
    _scale_installed_operator(k, 0)
    try:
        helm.run(
            "install", release, str(CHART), "--namespace", release_ns, "--create-namespace",
            "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
            "--set", "image.pullPolicy=Never", "--set", f"watchNamespaces={{{ns}}}",
            # The dev control plane serves the CRDs' conversion webhook (see operator_installed).
            "--set", "conversionWebhook.enabled=false",
            "--wait", "--timeout", "240s",
        )  # fmt: skip
        pods = json.loads(
            k.kubectl(
                "-n", release_ns, "get", "pods", "-l", f"app.kubernetes.io/instance={release}", "-o", "json"
            ).stdout
        )["items"]  # fmt: skip
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        assert len(running) == 2, [p["metadata"]["name"] for p in pods]
        assert {p["spec"]["nodeName"] for p in running} == {NODE_NAME}, (
            "the chart's operator runs on the real node"
        )
        assert {p["spec"]["containers"][0]["image"] for p in running} == {operator_installed}

        k.kubectl(
            "-n",
            ns,
            "apply",
            "-f",
            "-",
            input=workloads.TIME,
        )
        wait_ready(k, ns, "mcpserver/time", timeout=240)
        url = json.loads(k.kubectl("-n", ns, "get", "mcpserver", "time", "-o", "json").stdout)["status"][
            "url"
        ]
        answer = client.mcp(url, "get_current_time", {"timezone": "UTC"})
        assert json.loads(answer["result"])["timezone"] == "UTC"
        logs = k.kubectl(
            "-n", release_ns, "logs", "-l", f"app.kubernetes.io/instance={release}", "--tail=-1", "--prefix"
        ).stdout  # fmt: skip
        refused = [
            line
            for line in logs.splitlines()
            if "forbidden" in line.lower() and "being terminated" not in line
        ]
        assert not refused, "\n".join(refused[:20])
    finally:
        k.kubectl(
            "-n", ns, "delete", "mcpserver", "time", "--wait=true", "--timeout=60s", check=False, timeout=90
        )
        proc = helm.run(
            "uninstall", release, "--namespace", release_ns, "--wait", "--timeout", "120s", check=False
        )
        k.kubectl("delete", "namespace", release_ns, "--wait=false", check=False)
        _scale_installed_operator(k, 2)
        if proc.returncode != 0:
            pytest.fail(f"helm uninstall failed:\n{proc.stderr}", pytrace=False)
