"""The kubebuilder habit: `kubectl apply -f deploy/crds` as shipped, then `mcpfleet operator run` outside
the cluster. The shipped CRDs name the in-cluster Service `mcpfleet-conversion`, so a v1alpha1 object
cannot be created; with `MCPFLEET_CONVERSION_WEBHOOK_URL` the operator serves the webhook itself,
points the CRDs at it and the same object is created, converted both ways and reconciled."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from mcpfleet.api.conversion import CONVERT_PATH
from mcpfleet.devcluster.handle import ClusterHandle
from tests.conftest import CRDS_DIR
from tests.vmcp.servers import free_port

from .conftest import Kube, OperatorProcess

SERVER_V1ALPHA1 = """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: clock}
spec: {image: "uvx://mcp-server-time", groupRef: team}
"""


@pytest.fixture
def shipped_crds(dev_cluster: ClusterHandle, crds_installed: list[str]) -> Iterator[None]:
    """deploy/crds applied as a user would (their conversion names the in-cluster Service); the test
    harness's own webhook is pointed at again afterwards."""
    # As a fresh `kubectl apply -f deploy/crds` leaves it: the shipped clientConfig, nothing of the harness's.
    for crd in sorted(CRDS_DIR.glob("*.yaml")):
        document = yaml.safe_load(crd.read_text())
        if document["spec"]["conversion"]["strategy"] != "Webhook":
            continue
        shipped = document["spec"]["conversion"]["webhook"]["clientConfig"]
        patch = [{"op": "replace", "path": "/spec/conversion/webhook/clientConfig", "value": shipped}]
        dev_cluster.kubectl(
            "patch", "crd", document["metadata"]["name"], "--type=json", "-p", json.dumps(patch)
        )
    try:
        yield
    finally:
        dev_cluster.apply_crds(CRDS_DIR)


def _client_config(cluster: ClusterHandle) -> dict[str, object]:
    crd = json.loads(cluster.kubectl("get", "crd", "mcpservers.mcpfleet.dev", "-o", "json").stdout)
    config: dict[str, object] = crd["spec"]["conversion"]["webhook"]["clientConfig"]
    return config


def test_out_of_cluster_operator_serves_the_conversion_webhook(
    dev_cluster: ClusterHandle, namespace: str, shipped_crds: None, tmp_path: Path
) -> None:
    kube = Kube(dev_cluster, namespace)
    assert _client_config(dev_cluster)["service"] == {
        "name": "mcpfleet-conversion", "namespace": "mcpfleet-system", "path": CONVERT_PATH, "port": 443,
    }  # fmt: skip
    refused = dev_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=SERVER_V1ALPHA1, check=False)
    assert refused.returncode != 0 and "mcpfleet-conversion" in refused.stderr, refused.stderr

    url = f"https://127.0.0.1:{free_port()}"
    operator = OperatorProcess(
        dev_cluster, [namespace], tmp_path / "operator.log", env={"MCPFLEET_CONVERSION_WEBHOOK_URL": url}
    )
    operator.start()
    try:
        config = _client_config(dev_cluster)
        assert config["url"] == url + CONVERT_PATH and "service" not in config and config["caBundle"]
        kube.apply(SERVER_V1ALPHA1)
        beta = json.loads(
            dev_cluster.kubectl(
                "get", "-n", namespace, "mcpservers.v1beta1.mcpfleet.dev/clock", "-o", "json"
            ).stdout
        )
        assert beta["spec"]["groupRef"] == {"name": "team"}
        alpha = json.loads(
            dev_cluster.kubectl(
                "get", "-n", namespace, "mcpservers.v1alpha1.mcpfleet.dev/clock", "-o", "json"
            ).stdout
        )
        assert alpha["spec"]["groupRef"] == "team"
        status = dev_cluster.wait_for(
            "the server reconciled",
            lambda: (
                kube.status("MCPServer", "clock").get("observedGeneration")
                and kube.status("MCPServer", "clock")
            ),
        )
        assert status["phase"] in ("Pending", "Running", "Failed")
    finally:
        dev_cluster.kubectl("delete", "-n", namespace, "mcpservers", "--all", "--wait=false", check=False)
        operator.stop()
