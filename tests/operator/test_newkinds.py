"""The seven kinds ToolHive added, reconciled by the operator on the real control plane."""

from __future__ import annotations

import json

import yaml

from .conftest import Kube, OperatorProcess
from .gateway_report import report_healthy, wait_unreported

CONFIGS = """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPOIDCConfig
metadata: {name: idp}
spec: {type: inline, inline: {issuer: "https://auth.example.com", clientId: c, clientSecretRef: {name: s, key: k}}}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPTelemetryConfig
metadata: {name: otel}
spec: {openTelemetry: {enabled: true, endpoint: "collector:4318", insecure: true, tracing: {enabled: true}}}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPAuthzConfig
metadata: {name: policy}
spec: {type: cedarv1, config: {policies: ["permit(principal, action, resource);"]}}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPWebhookConfig
metadata: {name: hooks}
spec: {validating: [{name: pdp, url: "https://pdp.example.com/check"}]}
"""

GATEWAY = """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPGroup
metadata: {name: remote}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServerEntry
metadata: {name: context7}
spec:
  remoteUrl: https://mcp.context7.com/mcp
  transport: streamable-http
  groupRef: {name: remote}
  headerForward: {addPlaintextHeaders: {X-Tenant: t1}}
  caBundleRef: {configMapRef: {name: corp-ca, key: ca.crt}}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: VirtualMCPCompositeToolDefinition
metadata: {name: deploy}
spec:
  name: deploy_app
  steps:
    - {id: ask, type: elicitation, message: "Proceed?", schema: {type: object, properties: {ok: {type: boolean}}},
       onDecline: {action: skip_remaining}}
    - {id: run, tool: context7.resolve-library-id, arguments: {libraryName: x}, dependsOn: [ask]}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: VirtualMCPServer
metadata: {name: gw}
spec:
  config: {groupRef: remote, compositeToolRefs: [{name: deploy}]}
  incomingAuth: {type: anonymous}
"""


def test_config_kinds_turn_valid_with_a_hash(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(CONFIGS)
    for kind, name in (
        ("MCPOIDCConfig", "idp"),
        ("MCPTelemetryConfig", "otel"),
        ("MCPAuthzConfig", "policy"),
        ("MCPWebhookConfig", "hooks"),
    ):
        status = kube.cluster.wait_for(
            f"{kind}/{name} Valid",
            lambda k=kind, n=name: kube.status(k, n).get("configHash") and kube.status(k, n),
            timeout=60,
        )
        valid = next(c for c in status["conditions"] if c["type"] == "Valid")
        assert valid["status"] == "True" and len(status["configHash"]) == 64
        assert status["observedGeneration"] == 1


def test_entry_and_composite_definition_reach_the_gateway(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(GATEWAY)
    entry = kube.wait_phase("MCPServerEntry", "context7", "Valid")
    assert entry["observedGeneration"] == 1
    definition = kube.cluster.wait_for(
        "definition referenced",
        lambda: kube.status("VirtualMCPCompositeToolDefinition", "deploy").get("referencingWorkloads"),
        timeout=60,
    )
    assert definition == [{"kind": "VirtualMCPServer", "name": "gw"}]
    wait_unreported(kube, "gw", backends=1)
    report_healthy(kube, "gw")
    kube.wait_phase("VirtualMCPServer", "gw", "Ready", timeout=120)
    config_map = kube.get("ConfigMap", "vmcp-gw-config")
    assert config_map is not None
    rendered = yaml.safe_load(config_map["data"]["vmcp.yaml"])
    (backend,) = rendered["backends"]
    assert backend["name"] == "context7" and backend["url"] == "https://mcp.context7.com/mcp"
    assert backend["headers"] == [{"headerName": "X-Tenant", "headerValue": "t1"}]
    assert backend["caFile"] == "/etc/mcpfleet/configmaps/entry-context7-ca.crt"
    assert [t["name"] for t in rendered["compositeTools"]] == ["deploy_app"]
    assert rendered["compositeTools"][0]["steps"][0]["type"] == "elicitation"
    deployment = kube.get("Deployment", "vmcp-gw")
    assert deployment is not None
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    projected = next(v for v in volumes if v["name"] == "configmaps")["projected"]["sources"]
    assert {
        "configMap": {"name": "corp-ca", "items": [{"key": "ca.crt", "path": "entry-context7-ca.crt"}]}
    } in projected
    # Deleting the referenced definition waits for the gateway to let go of it.
    kube.delete("VirtualMCPCompositeToolDefinition", "deploy")
    blocked = kube.cluster.wait_for(
        "deletion blocked",
        lambda: next(
            (
                c
                for c in kube.status("VirtualMCPCompositeToolDefinition", "deploy").get("conditions", [])
                if c["type"] == "DeletionBlocked" and c["status"] == "True"
            ),
            None,
        ),
        timeout=60,
    )
    assert "VirtualMCPServer/gw" in blocked["message"]
    failed = kube.wait_phase("VirtualMCPServer", "gw", "Ready", timeout=30)
    assert failed  # still serving: the definition exists until the reference goes
    kube.apply(
        """
apiVersion: mcpfleet.dev/v1alpha1
kind: VirtualMCPServer
metadata: {name: gw}
spec: {config: {groupRef: remote}, incomingAuth: {type: anonymous}}
"""
    )
    kube.wait_gone("VirtualMCPCompositeToolDefinition", "deploy")
    # An entry whose group goes away is Pending, and its gateway stops listing it.
    kube.delete("MCPGroup", "remote")
    kube.wait_phase("MCPServerEntry", "context7", "Pending")


def test_embedding_server_runs_as_deployment_and_service(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(
        """
apiVersion: mcpfleet.dev/v1alpha1
kind: EmbeddingServer
metadata: {name: optimizer}
spec:
  model: BAAI/bge-small-en-v1.5
  hfTokenSecretRef: {name: hf, key: token}
  podTemplateSpec: {metadata: {annotations: {team: ml}}, spec: {nodeSelector: {kubernetes.io/os: linux}}}
"""
    )
    status = kube.wait_phase("EmbeddingServer", "optimizer", "Ready", timeout=120)
    assert status["url"] == f"http://emb-optimizer.{kube.ns}.svc.cluster.local:8080"
    assert status["readyReplicas"] == 1
    deployment = kube.get("Deployment", "emb-optimizer")
    assert deployment is not None
    template = deployment["spec"]["template"]
    assert template["metadata"]["annotations"]["team"] == "ml"
    assert template["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    (container,) = template["spec"]["containers"]
    assert container["image"] == "ghcr.io/huggingface/text-embeddings-inference:cpu-latest"
    assert container["args"] == ["--model-id", "BAAI/bge-small-en-v1.5", "--port", "8080"]
    service = kube.get("Service", "emb-optimizer")
    assert service is not None and service["spec"]["ports"][0]["port"] == 8080


def test_workload_references_reach_the_pod_and_the_gateway(kube: Kube, operator: OperatorProcess) -> None:
    """oidcConfigRef / telemetryConfigRef / authzConfigRef on an MCPServer, embeddingServerRef on a
    gateway: each changes what the operator renders (not only the referenced object's status)."""
    kube.apply(CONFIGS)
    kube.apply(
        """
apiVersion: mcpfleet.dev/v1beta1
kind: MCPServer
metadata: {name: refs}
spec:
  image: "uvx://mcp-server-time"
  oidcConfigRef: {name: idp, audience: time}
  telemetryConfigRef: {name: otel, serviceName: time-svc}
  authzConfigRef: {name: policy}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPGroup
metadata: {name: opt}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: EmbeddingServer
metadata: {name: emb}
spec: {model: BAAI/bge-small-en-v1.5}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: VirtualMCPServer
metadata: {name: optgw}
spec:
  config: {groupRef: opt}
  incomingAuth: {type: anonymous}
  embeddingServerRef: {name: emb}
"""
    )
    kube.wait_phase("MCPServer", "refs", "Running", timeout=120)
    config_map = kube.get("ConfigMap", "mcp-refs-config")
    assert config_map is not None
    auth = json.loads(config_map["data"]["auth.json"])
    assert auth["oidc"]["issuer"] == "https://auth.example.com" and auth["oidc"]["audience"] == "time"
    authz = json.loads(config_map["data"]["authz.json"])
    assert authz["cedar"]["policies"] == ["permit(principal, action, resource);"]
    deployment = kube.get("Deployment", "mcp-refs")
    assert deployment is not None
    (proxy,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in proxy["env"]}
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == "http://collector:4318"
    assert env["OTEL_SERVICE_NAME"]["value"] == "time-svc"
    assert env["MCPFLEET_OIDC_CLIENT_SECRET"]["valueFrom"]["secretKeyRef"] == {"name": "s", "key": "k"}
    proxy_json = json.loads(config_map["data"]["proxy.json"])
    assert proxy_json["authzConfig"] == "authz.json" and proxy_json["authConfig"] == "auth.json"
    assert "/etc/mcpfleet/config/proxy.json" in proxy["command"]
    # The gateway waits for its EmbeddingServer, then uses its URL.
    kube.wait_phase("EmbeddingServer", "emb", "Ready", timeout=120)
    url = f"http://emb-emb.{kube.ns}.svc.cluster.local:8080"

    def optimizer() -> dict[str, object] | None:
        gateway_config = kube.get("ConfigMap", "vmcp-optgw-config")
        if gateway_config is None:
            return None
        found: dict[str, object] | None = yaml.safe_load(gateway_config["data"]["vmcp.yaml"]).get("optimizer")
        return found if found and found.get("embeddingService") == url else None

    rendered = kube.cluster.wait_for("gateway optimizer", optimizer, timeout=120)
    assert rendered["embeddingProvider"] == "tei"


def test_a_definition_the_models_refuse_is_invalid_in_toolhive_fields(
    kube: Kube, operator: OperatorProcess
) -> None:
    """A dependsOn cycle passes the CRD's CEL (it cannot see cycles) and is refused by the models: the
    status says so in the Valid condition and in ToolHive's validationStatus / validationErrors."""
    kube.apply(
        """
apiVersion: mcpfleet.dev/v1alpha1
kind: VirtualMCPCompositeToolDefinition
metadata: {name: cycle}
spec: {name: cycle, steps: [{id: a, tool: x.y, dependsOn: [b]}, {id: b, tool: x.y, dependsOn: [a]}]}
"""
    )
    status = kube.cluster.wait_for(
        "definition refused",
        lambda: (
            (s := kube.status("VirtualMCPCompositeToolDefinition", "cycle")).get("validationStatus")
            == "Invalid"
            and s
        ),
        timeout=60,
    )
    assert any("dependsOn forms a cycle" in e for e in status["validationErrors"])
    valid = next(c for c in status["conditions"] if c["type"] == "Valid")
    assert valid["status"] == "False" and "cycle" in valid["message"]
    assert status["referencingVirtualServers"] == []  # nothing references it
