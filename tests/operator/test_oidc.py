"""Incoming OIDC on the real control plane: an MCPServer with `oidcConfigRef` gets the referenced
ConfigMap's `oidc.json` mounted and its proxy started with the auth config naming it."""

from __future__ import annotations

import json

from .conftest import Kube, OperatorProcess


def test_oidc_config_ref_mounts_the_config_map_key_and_starts_the_proxy_with_it(
    kube: Kube, operator: OperatorProcess
) -> None:
    kube.apply(
        """
apiVersion: v1
kind: ConfigMap
metadata: {name: team-oidc}
data:
  oidc.json: '{"issuer": "https://idp.example.com", "audience": "shared", "jwksUrl": "https://idp.example.com/keys"}'
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: time}
spec:
  image: "uvx://mcp-server-time"
  oidcConfigRef: {name: team-oidc, audience: time, scopes: [mcp]}
"""
    )
    status = kube.wait_phase("MCPServer", "time", "Running")
    assert status["url"].endswith(":8080/mcp")
    deployment = kube.get("Deployment", "mcp-time")
    assert deployment is not None
    pod = deployment["spec"]["template"]["spec"]
    (proxy,) = pod["containers"]
    # The proxy's config names the auth config beside it (the server's command has no part of it).
    command = proxy["command"]
    at = command.index("--config")
    assert command[at + 1] == "/etc/mcpfleet/config/proxy.json" and at < command.index("--")
    config_map = kube.get("ConfigMap", "mcp-time-config")
    assert config_map is not None
    assert json.loads(config_map["data"]["proxy.json"])["authConfig"] == "auth.json"
    # The user's ConfigMap key is mounted where the auth config says.
    volume = next(v for v in pod["volumes"] if v["name"] == "configmaps")
    assert volume["projected"]["sources"] == [
        {"configMap": {"name": "team-oidc", "items": [{"key": "oidc.json", "path": "oidc.json"}]}}
    ]
    mounts = {m["name"]: m for m in proxy["volumeMounts"]}
    assert (
        mounts["configmaps"]["mountPath"] == "/etc/mcpfleet/configmaps" and mounts["configmaps"]["readOnly"]
    )
    assert mounts["config"]["mountPath"] == "/etc/mcpfleet/config"
    config_map = kube.get("ConfigMap", "mcp-time-config")
    assert config_map is not None
    auth = json.loads(config_map["data"]["auth.json"])
    assert auth == {
        "type": "oidc",
        "oidcFile": "/etc/mcpfleet/configmaps/oidc.json",
        "oidc": {"audience": "time", "scopes": ["mcp"]},
    }
    # The pod really runs with that spec (kwok plays it Ready).
    pods = kube.items("Pod", "app.kubernetes.io/instance=time")
    assert pods and any(v["name"] == "configmaps" for v in pods[0]["spec"]["volumes"])
