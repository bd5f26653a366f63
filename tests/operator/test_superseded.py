"""A ToolHive v1beta1 VirtualMCPServer that sets the superseded spec.config.groupRef / name on the real
control plane: it applies, the operator reads the group from there, and a Warning event names the fields;
a conflict between the two places is refused by the API server naming both."""

from __future__ import annotations

from .conftest import Kube, OperatorProcess

TOOLHIVE_STYLE = """
apiVersion: mcpfleet.dev/v1beta1
kind: MCPGroup
metadata: {name: team}
spec: {}
---
apiVersion: mcpfleet.dev/v1beta1
kind: VirtualMCPServer
metadata: {name: gw}
spec:
  config: {groupRef: team, name: gw, metadata: {owner: platform}}
  incomingAuth: {type: anonymous}
"""


def test_superseded_fields_apply_read_as_current_and_warn(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(TOOLHIVE_STYLE)
    stored = kube.get("VirtualMCPServer", "gw")
    assert stored is not None and stored["spec"]["config"]["groupRef"] == "team"
    kube.cluster.wait_for(
        "the gateway's status", lambda: kube.status("VirtualMCPServer", "gw").get("observedGeneration")
    )
    config_map = kube.cluster.wait_for(
        "the gateway's config", lambda: kube.get("ConfigMap", "vmcp-gw-config")
    )
    assert "groupRef: team" in config_map["data"]["vmcp.yaml"]
    event = kube.cluster.wait_for(
        "the SupersededField event",
        lambda: next((e for e in kube.events("gw") if e["reason"] == "SupersededField"), None),
    )
    assert event["type"] == "Warning"
    assert "spec.config.groupRef is superseded: read as spec.groupRef.name" in event["message"]
    assert "spec.config.name is superseded: read as metadata.name" in event["message"]

    refused = kube.cluster.kubectl(
        "apply", "-n", kube.ns, "-f", "-", check=False,
        input=TOOLHIVE_STYLE.replace("config: {groupRef: team,", "groupRef: {name: other}\n  config: {groupRef: team,"),
    )  # fmt: skip
    assert refused.returncode != 0
    assert "spec.config.groupRef and spec.groupRef.name differ" in refused.stderr
