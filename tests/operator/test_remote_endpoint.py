"""MCPRemoteProxy `allowPrivateEndpoint` on the real control plane: an in-cluster upstream is Failed
naming the field (no children), and runs once the field allows it; the API server keeps the field."""

from __future__ import annotations

from .conftest import Kube, OperatorProcess

PROXY = """
apiVersion: mcpfleet.dev/v1beta1
kind: MCPRemoteProxy
metadata: {name: inmesh}
spec: {remoteUrl: "http://mcp-time.other.svc.cluster.local:8080/mcp"}
"""


def test_private_upstream_needs_allow_private_endpoint(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(PROXY)
    failed = kube.wait_phase("MCPRemoteProxy", "inmesh", "Failed")
    assert failed["message"].startswith(
        "spec.allowPrivateEndpoint: mcp-time.other.svc.cluster.local is a private"
    )
    assert (
        kube.get("Deployment", "mcp-inmesh-remote") is None and kube.get("Deployment", "mcp-inmesh") is None
    )
    kube.apply(PROXY.replace("spec: {", "spec: {allowPrivateEndpoint: true, "))
    running = kube.wait_phase("MCPRemoteProxy", "inmesh", "Running", timeout=90)
    assert running["url"]
    stored = kube.get("MCPRemoteProxy", "inmesh")
    assert stored is not None and stored["spec"]["allowPrivateEndpoint"] is True
