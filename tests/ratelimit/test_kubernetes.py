"""Rate limits and Redis session storage rendered by the operator on the dev cluster: the Deployment
runs the requested replicas, the Redis password reaches the process only as secretKeyRef env (never
in a ConfigMap), and the API server enforces the CEL rules of `rateLimiting` / `sessionStorage`."""

from __future__ import annotations

import json

import pytest
import yaml

from mcpfleet.devcluster.handle import KubectlError
from tests.operator.conftest import Kube, OperatorProcess

PASSWORD = "s3cret-redis-pw-4711"

SETUP = f"""
apiVersion: v1
kind: Secret
metadata: {{name: redis-auth}}
stringData: {{password: {PASSWORD}}}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPGroup
metadata: {{name: team}}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {{name: time}}
spec:
  image: "uvx://mcp-server-time"
  groupRef: team
  rateLimiting:
    shared: {{maxTokens: 50, refillPeriod: 1m}}
    tools: [{{name: get_current_time, shared: {{maxTokens: 5, refillPeriod: 10s}}}}]
  sessionStorage:
    provider: redis
    address: redis.default.svc:6379
    passwordRef: {{name: redis-auth, key: password}}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: VirtualMCPServer
metadata: {{name: gw}}
spec:
  replicas: 3
  config:
    groupRef: team
    rateLimiting:
      shared: {{maxTokens: 100, refillPeriod: 1m}}
      tools: [{{name: time_get_current_time, shared: {{maxTokens: 10, refillPeriod: 1m}}}}]
  incomingAuth: {{type: anonymous}}
  sessionStorage:
    provider: redis
    address: redis.default.svc:6379
    keyPrefix: "mcpfleet:"
    passwordRef: {{name: redis-auth, key: password}}
"""


def test_replicas_and_redis_password_from_a_secret(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(SETUP)
    deployment = kube.cluster.wait_for("gateway Deployment", lambda: kube.get("Deployment", "vmcp-gw"))
    assert deployment["spec"]["replicas"] == 3
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {
        "name": "MCPFLEET_REDIS_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "redis-auth", "key": "password"}},
    } in env
    config_map = kube.cluster.wait_for("gateway ConfigMap", lambda: kube.get("ConfigMap", "vmcp-gw-config"))
    config = yaml.safe_load(config_map["data"]["vmcp.yaml"])
    assert config["sessionStorage"] == {
        "provider": "redis",
        "address": "redis.default.svc:6379",
        "db": 0,
        "keyPrefix": "mcpfleet:",
        "passwordRef": {"name": "redis-auth", "key": "password"},
    }
    assert config["rateLimiting"]["tools"][0]["name"] == "time_get_current_time"
    # The stdio server's proxy enforces its limits from the run config; same password rule.
    server = kube.cluster.wait_for("server Deployment", lambda: kube.get("Deployment", "mcp-time"))
    proxy = server["spec"]["template"]["spec"]["containers"][0]
    assert "/etc/mcpfleet/config/proxy.json" in proxy["command"]
    assert {
        "name": "MCPFLEET_REDIS_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "redis-auth", "key": "password"}},
    } in proxy["env"]
    run_config_map = kube.cluster.wait_for(
        "server ConfigMap", lambda: kube.get("ConfigMap", "mcp-time-config")
    )
    assert json.loads(run_config_map["data"]["proxy.json"])["runConfig"] == "runconfig.json"
    run_config = json.loads(run_config_map["data"]["runconfig.json"])
    assert run_config["rateLimiting"]["tools"] == [
        {"name": "get_current_time", "shared": {"maxTokens": 5, "refillPeriod": "10s"}}
    ]
    # The password itself is in no ConfigMap of the namespace.
    for cm in kube.items("ConfigMap"):
        assert PASSWORD not in json.dumps(cm.get("data") or {}), cm["metadata"]["name"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "replicas: 2\n  config: {groupRef: team, rateLimiting: {shared: {maxTokens: 1, refillPeriod: 1s}}}\n"
            "  incomingAuth: {type: anonymous}",
            "rateLimiting with more than one replica requires sessionStorage with provider 'redis'",
        ),
        (
            "config: {groupRef: team, rateLimiting: {perUser: {maxTokens: 1, refillPeriod: 1s}}}\n"
            "  incomingAuth: {type: anonymous}",
            "perUser rate limiting requires incomingAuth type oidc",
        ),
        (
            "config: {groupRef: team, rateLimiting: {tools: [{name: x}]}}\n  incomingAuth: {type: anonymous}",
            "at least one of shared or perUser must be configured",
        ),
        (
            "config: {groupRef: team}\n  incomingAuth: {type: anonymous}\n  sessionStorage: {provider: redis}",
            "address is required",
        ),
        (  # ToolHive's v1beta1 shape: groupRef beside config
            "v1beta1:groupRef: {name: team}\n  replicas: 3\n"
            "  config: {rateLimiting: {shared: {maxTokens: 1, refillPeriod: 1s}}}\n  incomingAuth: {type: anonymous}",
            "rateLimiting with more than one replica requires sessionStorage with provider 'redis'",
        ),
    ],
)
def test_api_server_refuses_invalid_combinations(kube: Kube, spec: str, message: str) -> None:
    version = "v1beta1" if spec.startswith("v1beta1:") else "v1alpha1"
    spec = spec.removeprefix("v1beta1:")
    manifest = f"apiVersion: mcpfleet.dev/{version}\nkind: VirtualMCPServer\nmetadata: {{name: bad}}\nspec:\n  {spec}\n"
    with pytest.raises(KubectlError, match=message.replace("(", r"\(").replace(")", r"\)")):
        kube.apply(manifest)
    # One replica keeps its buckets in memory: no Redis needed (a deliberate difference from ToolHive).
    kube.apply(
        "apiVersion: mcpfleet.dev/v1alpha1\nkind: VirtualMCPServer\nmetadata: {name: fine}\nspec:\n"
        "  replicas: 1\n  config: {groupRef: team, rateLimiting: {shared: {maxTokens: 1, refillPeriod: 1s}}}\n"
        "  incomingAuth: {type: anonymous}\n"
    )
    # A v1beta1 gateway without `config` at all passes the rules (they guard the optional config).
    kube.apply(
        "apiVersion: mcpfleet.dev/v1beta1\nkind: VirtualMCPServer\nmetadata: {name: bare}\nspec:\n"
        "  groupRef: {name: team}\n  replicas: 3\n  incomingAuth: {type: anonymous}\n"
    )
