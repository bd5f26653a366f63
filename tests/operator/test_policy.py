"""authzConfig and audit on the real control plane: what the operator renders for an MCPServer (inline
policies in its ConfigMap, the proxy started with them and with audit), for a VirtualMCPServer (a
ConfigMap key mounted and named by the gateway's config), and that a policy edit rewrites the
ConfigMap without rolling the pods (the proxy re-reads the mounted file)."""

from __future__ import annotations

import json
import time

import yaml

from .conftest import Kube, OperatorProcess

POLICY = 'permit(principal, action == Action::"call_tool", resource == Tool::"get_current_time");'


def server(policy: str) -> str:
    return f"""
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {{name: time}}
spec:
  image: "uvx://mcp-server-time"
  groupRef: team
  audit: {{enabled: true}}
  authzConfig:
    type: inline
    groupClaimName: groups
    inline:
      policies: [{json.dumps(policy)}]
"""


def test_policies_and_audit_are_rendered_and_edits_do_not_roll(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(
        """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPGroup
metadata: {name: team}
spec: {}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: team-policies}
data:
  authz.json: '{"version": "1.0", "type": "cedarv1", "cedar": {"policies": ["permit(principal, action, resource);"]}}'
---
apiVersion: mcpfleet.dev/v1alpha1
kind: VirtualMCPServer
metadata: {name: gw}
spec:
  config:
    groupRef: team
    audit: {enabled: true, includeRequestData: false}
  incomingAuth:
    type: anonymous
    authzConfig:
      type: configMap
      configMap: {name: team-policies}
      roleClaimName: roles
"""
        + "---\n"
        + server(POLICY)
    )
    kube.wait_phase("MCPServer", "time", "Running")
    deployment = kube.get("Deployment", "mcp-time")
    assert deployment is not None
    template = deployment["spec"]["template"]
    (proxy,) = template["spec"]["containers"]
    command = proxy["command"]
    assert command[command.index("--config") + 1] == "/etc/mcpfleet/config/proxy.json"
    config_map = kube.get("ConfigMap", "mcp-time-config")
    assert config_map is not None
    proxy_json = json.loads(config_map["data"]["proxy.json"])
    assert proxy_json["authzConfig"] == "authz.json" and proxy_json["auditConfig"] == "audit.json"
    authz = json.loads(config_map["data"]["authz.json"])
    assert authz["cedar"]["policies"] == [POLICY] and authz["group_claim_name"] == "groups"
    assert json.loads(config_map["data"]["audit.json"])["enabled"] is True

    # A policy edit: the ConfigMap changes, the pod template does not (no roll, sessions stay).
    checksum = template["metadata"]["annotations"]
    edited = POLICY.replace("get_current_time", "convert_time")
    kube.apply(server(edited))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        config_map = kube.get("ConfigMap", "mcp-time-config")
        if config_map is not None and json.loads(config_map["data"]["authz.json"])["cedar"]["policies"] == [
            edited
        ]:
            break
        time.sleep(0.5)
    assert config_map is not None and json.loads(config_map["data"]["authz.json"])["cedar"]["policies"] == [
        edited
    ]
    after = kube.get("Deployment", "mcp-time")
    assert after is not None and after["spec"]["template"]["metadata"]["annotations"] == checksum

    # The gateway: the user's ConfigMap key is mounted and named by the config's `authz.authzFile`.
    vmcp = kube.cluster.wait_for("Deployment vmcp-gw", lambda: kube.get("Deployment", "vmcp-gw"), timeout=60)
    pod = vmcp["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "configmaps")
    assert {
        "configMap": {"name": "team-policies", "items": [{"key": "authz.json", "path": "authz-policy.json"}]}
    } in (volume["projected"]["sources"])
    vmcp_config = kube.get("ConfigMap", "vmcp-gw-config")
    assert vmcp_config is not None
    rendered = yaml.safe_load(next(iter(vmcp_config["data"].values())))
    assert rendered["authz"] == {
        "authzFile": "/etc/mcpfleet/configmaps/authz-policy.json",
        "role_claim_name": "roles",
        "type": "cedarv1",
        "version": "1.0",
    }
    assert rendered["audit"]["enabled"] is True


def test_a_policy_cedar_rejects_fails_the_server_with_the_policy_named(
    kube: Kube, operator: OperatorProcess
) -> None:
    kube.apply(server("permit(principal, action").replace("name: time", "name: broken"))
    status = kube.wait_phase("MCPServer", "broken", "Failed")
    assert "spec.authzConfig.inline.policies[0]" in status["message"]
    assert kube.get("Deployment", "mcp-broken") is None
