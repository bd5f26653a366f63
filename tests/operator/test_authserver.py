"""The operator renders an embeddedAuthServer MCPExternalAuthConfig (ToolHive's Redis Sentinel example,
only apiVersion changed) on the real control plane: the proxy runs `--authserver-config`, the document
sits in the ConfigMap with file paths only, the Secrets are a volume mounted into the proxy container
only, and no Secret value appears in a ConfigMap, an argument or an environment value."""

from __future__ import annotations

import json

import yaml

from tests.api.corpus import toolhive_documents

from .conftest import Kube, OperatorProcess

SECRET_VALUES = ("google-client-secret-value", "redis-user-value", "redis-password-value")


def _example() -> str:
    for label, document in toolhive_documents("v1beta1"):
        if "redis-storage/mcpexternalauthconfig" in label:
            document = {**document, "apiVersion": "mcpfleet.dev/v1beta1"}
            document["metadata"] = {"name": document["metadata"]["name"]}
            return yaml.safe_dump(document)
    raise AssertionError("ToolHive's redis-storage example is missing")


def test_embedded_auth_server_is_rendered_with_mounted_secrets(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(_example())
    kube.apply(
        f"""
apiVersion: v1
kind: Secret
metadata: {{name: google-oauth-secret}}
stringData: {{client-secret: {SECRET_VALUES[0]}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: redis-credentials}}
stringData: {{username: {SECRET_VALUES[1]}, password: {SECRET_VALUES[2]}}}
---
apiVersion: mcpfleet.dev/v1beta1
kind: MCPServer
metadata: {{name: guarded}}
spec:
  image: ghcr.io/example/http-server:1
  transport: streamable-http
  mcpPort: 8081
  externalAuthConfigRef: {{name: auth-with-redis}}
"""
    )
    kube.wait_phase("MCPServer", "guarded", "Running", timeout=120)
    status = kube.cluster.wait_for(
        "auth-with-redis references",
        lambda: (
            kube.status("MCPExternalAuthConfig", "auth-with-redis").get("referencingWorkloads")
            and kube.status("MCPExternalAuthConfig", "auth-with-redis")
        ),
        timeout=60,
    )
    assert status["referencingWorkloads"] == [{"kind": "MCPServer", "name": "guarded"}]
    config_map = kube.get("ConfigMap", "mcp-guarded-config")
    assert config_map is not None
    document = json.loads(config_map["data"]["authserver.json"])
    assert document["issuer"] == "https://auth.example.com"
    assert document["storage"] == "redis"
    assert document["redis"]["sentinelAddrs"] == ["redis-sentinel.redis.svc:26379"]
    assert document["upstream"]["clientSecretFile"].startswith("/")
    deployment = kube.get("Deployment", "mcp-guarded")
    assert deployment is not None
    pod = deployment["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    assert "/etc/mcpfleet/config/proxy.json" in containers["proxy"]["command"]
    assert json.loads(config_map["data"]["proxy.json"])["authserverConfig"] == "authserver.json"
    secret_volumes = {
        v["name"]
        for v in pod["volumes"]
        if "secret" in v or any("secret" in s for s in (v.get("projected") or {}).get("sources", []))
    }
    names = json.dumps([v for v in pod["volumes"] if v["name"] in secret_volumes])
    assert "google-oauth-secret" in names and "redis-credentials" in names
    assert secret_volumes & {m["name"] for m in containers["proxy"].get("volumeMounts", [])}
    assert not secret_volumes & {m["name"] for m in containers["mcp"].get("volumeMounts", [])}
    rendered = json.dumps([config_map, deployment])
    assert not any(value in rendered for value in SECRET_VALUES)
