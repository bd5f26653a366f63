"""The other kinds on the real control plane: OCI stdio (attach), config kinds, groups, vMCP,
registry, remote proxy; failure on a broken spec and back."""

from __future__ import annotations

import json

import yaml

from .conftest import Kube, OperatorProcess
from .gateway_report import report_healthy, wait_unreported


def test_oci_stdio_server_is_attached_through_the_api(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(
        """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: git}
spec: {image: "ghcr.io/acme/git-mcp:1.0", args: ["--repo", "/data"]}
"""
    )
    status = kube.wait_phase("MCPServer", "git", "Running")
    assert status["url"].endswith(":8080/mcp")
    deployment = kube.get("Deployment", "mcp-git")
    assert deployment is not None
    pod = deployment["spec"]["template"]["spec"]
    server, runner = pod["containers"]
    assert server["image"] == "ghcr.io/acme/git-mcp:1.0" and server["stdin"] is True
    assert server["args"] == ["--repo", "/data"] and "command" not in server
    assert runner["command"][:4] == ["mcpfleet", "proxy", "--config", "/etc/mcpfleet/config/proxy.json"]
    config_map = kube.get("ConfigMap", "mcp-git-config")
    assert config_map is not None
    assert json.loads(config_map["data"]["proxy.json"])["attach"] == {
        "namespace": kube.ns,
        "podFromEnv": "POD_NAME",
        "container": "mcp",
    }
    assert {
        "name": "POD_NAME",
        "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
    } in runner["env"]
    assert pod["serviceAccountName"] == "mcp-git" and pod["automountServiceAccountToken"] is True
    role = kube.get("Role", "mcp-git")
    assert role is not None
    assert any("pods/attach" in rule["resources"] for rule in role["rules"])
    binding = kube.get("RoleBinding", "mcp-git")
    assert binding is not None and binding["subjects"][0]["name"] == "mcp-git"
    # The pod really runs (kwok plays it Ready) with that spec.
    pods = kube.items("Pod", "app.kubernetes.io/instance=git")
    assert pods and pods[0]["spec"]["containers"][0]["stdin"] is True


def test_broken_spec_fails_and_recovers_with_tool_config(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(
        """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: fetch}
spec: {image: "uvx://mcp-server-fetch", toolConfigRef: {name: fetch-tools}}
"""
    )
    failed = kube.wait_phase("MCPServer", "fetch", "Failed")
    assert "toolConfigRef: MCPToolConfig fetch-tools not found" in failed["message"]
    assert "url" not in failed
    assert kube.get("Deployment", "mcp-fetch") is None  # nothing runs for a spec that cannot run
    warnings = [e for e in kube.events("fetch") if e["type"] == "Warning"]
    assert warnings and warnings[0]["reason"] == "InvalidSpec"

    kube.apply(
        """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPToolConfig
metadata: {name: fetch-tools}
spec: {toolsFilter: [fetch]}
"""
    )
    running = kube.wait_phase("MCPServer", "fetch", "Running")
    assert running["url"]
    tool_status = kube.cluster.wait_for(
        "tool config status",
        lambda: (s := kube.status("MCPToolConfig", "fetch-tools")).get("referencingWorkloads") and s,
    )
    assert tool_status["referencingWorkloads"] == [{"kind": "MCPServer", "name": "fetch"}]
    assert len(tool_status["configHash"]) == 64
    assert next(c for c in tool_status["conditions"] if c["type"] == "Valid")["status"] == "True"
    tool = kube.get("MCPToolConfig", "fetch-tools")
    assert tool is not None and "mcpfleet.dev/in-use" in tool["metadata"]["finalizers"]

    def checksum() -> str:
        deployment = kube.get("Deployment", "mcp-fetch")
        assert deployment is not None
        return str(deployment["spec"]["template"]["metadata"]["annotations"]["mcpfleet.dev/config-checksum"])

    before = checksum()
    kube.apply(
        """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPToolConfig
metadata: {name: fetch-tools}
spec: {toolsFilter: [fetch, fetch_html]}
"""
    )
    kube.cluster.wait_for(
        "the tool config change to roll the server", lambda: checksum() != before, timeout=30
    )

    # Deleting a referenced config is blocked, and the status says by whom.
    kube.delete("MCPToolConfig", "fetch-tools")
    blocked = kube.cluster.wait_for(
        "DeletionBlocked",
        lambda: next(
            (
                c
                for c in kube.status("MCPToolConfig", "fetch-tools").get("conditions", [])
                if c["type"] == "DeletionBlocked"
            ),
            None,
        ),
    )
    assert blocked["status"] == "True" and "MCPServer/fetch" in blocked["message"]
    assert kube.get("MCPToolConfig", "fetch-tools") is not None
    kube.delete("MCPServer", "fetch")
    kube.wait_gone("MCPToolConfig", "fetch-tools")


def test_group_membership_and_group_deletion(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(
        """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPGroup
metadata: {name: tools}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: a}
spec: {image: "uvx://a", groupRef: tools}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: b}
spec: {image: "uvx://b", groupRef: tools}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPRemoteProxy
metadata: {name: r}
spec: {remoteURL: "https://mcp.example.com/mcp", groupRef: tools}
"""
    )
    status = kube.cluster.wait_for(
        "group status",
        lambda: (
            (s := kube.status("MCPGroup", "tools")).get("serverCount") == 2
            and s.get("remoteProxyCount") == 1
            and s
        ),
    )
    assert (
        status["servers"] == ["a", "b"]
        and status["remoteProxies"] == ["r"]
        and status["remoteProxyCount"] == 1
    )
    kube.wait_phase("MCPRemoteProxy", "r", "Running")
    proxy = kube.get("Deployment", "mcprp-r")
    assert proxy is not None
    container = proxy["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:4] == ["mcpfleet", "proxy", "--config", "/etc/mcpfleet/config/proxy.json"]
    config_map = kube.get("ConfigMap", "mcprp-r-config")
    assert config_map is not None
    assert json.loads(config_map["data"]["proxy.json"])["remoteFromEnv"] == "MCPFLEET_REMOTE_URL"
    assert {"name": "MCPFLEET_REMOTE_URL", "value": "https://mcp.example.com/mcp"} in container["env"]

    def group_condition(kind: str, name: str) -> str | None:
        for condition in kube.status(kind, name).get("conditions", []):
            if condition["type"] == "GroupRefValidated":
                return str(condition["status"])
        return None

    kube.cluster.wait_for("GroupRefValidated True", lambda: group_condition("MCPServer", "a") == "True")
    kube.delete("MCPGroup", "tools")
    members = (("MCPServer", "a"), ("MCPServer", "b"), ("MCPRemoteProxy", "r"))
    kube.cluster.wait_for(
        "GroupRefValidated False on every member",
        lambda: all(group_condition(kind, name) == "False" for kind, name in members),
    )
    assert kube.status("MCPServer", "a")["phase"] == "Running"  # members keep running


VMCP_SETUP = """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPGroup
metadata: {name: team}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: time}
spec: {image: "uvx://mcp-server-time", groupRef: team, externalAuthConfigRef: {name: time-key}}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPExternalAuthConfig
metadata: {name: time-key}
spec:
  type: headerInjection
  headerInjection: {headerName: X-Api-Key, valueSecretRef: {name: time-secret, key: key}}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: fetch}
spec: {image: "uvx://mcp-server-fetch", groupRef: team, proxyMode: sse}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: outsider}
spec: {image: "uvx://other"}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: VirtualMCPServer
metadata: {name: gw}
spec:
  config: {groupRef: team, aggregation: {conflictResolution: prefix}}
  incomingAuth: {type: anonymous}
"""


def test_virtual_mcp_server(kube: Kube, operator: OperatorProcess) -> None:
    from mcpfleet.vmcp.config import VMCPConfig

    kube.apply(VMCP_SETUP)
    kube.wait_phase("MCPServer", "time", "Running")
    kube.wait_phase("MCPServer", "fetch", "Running")
    # Serving replicas alone are not Ready: the gateway has not reported its backends yet.
    waiting = wait_unreported(kube, "gw", backends=2)
    assert (
        waiting["phase"] == "Pending" and "waiting for the gateway to report backends" in waiting["message"]
    )
    report_healthy(kube, "gw")
    status = kube.cluster.wait_for(
        "vMCP Ready with both backends",
        lambda: (
            (s := kube.status("VirtualMCPServer", "gw")).get("phase") in ("Ready", "Degraded")
            and s.get("backendCount") == 2
            and all(b.get("url") for b in s["discoveredBackends"])
            and s
        ),
    )
    assert status["url"] == f"http://vmcp-gw.{kube.ns}.svc.cluster.local:4483/mcp"
    assert [b["name"] for b in status["discoveredBackends"]] == ["fetch", "time"]
    # Counts come only from a running gateway; none reported one here.
    assert "toolCount" not in status and "resourceCount" not in status
    config_map = kube.get("ConfigMap", "vmcp-gw-config")
    assert config_map is not None
    config = VMCPConfig.model_validate(yaml.safe_load(config_map["data"]["vmcp.yaml"]))
    urls = {b.name: (b.url, b.transport) for b in config.backends}
    assert urls == {
        "time": (f"http://mcp-time.{kube.ns}.svc.cluster.local:8080/mcp", "streamable-http"),
        "fetch": (f"http://mcp-fetch.{kube.ns}.svc.cluster.local:8080/sse", "sse"),
    }
    # Outgoing auth resolved from the member's MCPExternalAuthConfig: the value only by secret reference.
    auth = config.outgoing_auth.backends["time"]
    assert auth.type == "header_injection" and auth.header_injection is not None
    assert auth.header_injection.header_name == "X-Api-Key" and auth.header_injection.header_value is None
    gateway = kube.get("Deployment", "vmcp-gw")
    assert gateway is not None
    env = gateway["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {
        "name": auth.header_injection.header_value_env,
        "valueFrom": {"secretKeyRef": {"name": "time-secret", "key": "key"}},
    } in env
    auth_status = kube.cluster.wait_for(
        "ext auth status",
        lambda: (s := kube.status("MCPExternalAuthConfig", "time-key")).get("configHash") and s,
    )
    assert auth_status["referencingWorkloads"] == [{"kind": "MCPServer", "name": "time"}]
    role = kube.get("Role", "vmcp-gw")
    assert role is not None
    assert any(r["resources"] == ["virtualmcpservers/status"] for r in role["rules"])

    # The gateway reports an unhealthy backend: Degraded, its report kept.
    backends = [
        dict(
            b,
            status="unhealthy" if b["name"] == "fetch" else "healthy",
            lastHealthCheck="2026-01-01T00:00:00Z",
        )
        for b in status["discoveredBackends"]
    ]
    kube.cluster.kubectl(
        "patch", "-n", kube.ns, "virtualmcpservers", "gw", "--subresource=status", "--type=merge",
        "-p", yaml.safe_dump({"status": {"discoveredBackends": backends, "toolCount": 5}}),
    )  # fmt: skip
    degraded = kube.wait_phase("VirtualMCPServer", "gw", "Degraded")
    assert degraded["toolCount"] == 5 and "fetch" in degraded["message"]

    # A change to a server outside the group does not reconcile the gateway; a member's change does.
    settled = operator.wait_idle()
    key = f"VirtualMCPServer/{kube.ns}/gw"
    count = settled["reconciles"][key]
    kube.cluster.kubectl(
        "patch", "-n", kube.ns, "mcpservers", "outsider", "--type=merge", "-p", '{"spec":{"args":["x"]}}'
    )
    after_outsider = operator.wait_idle()
    assert (
        after_outsider["reconciles"][f"MCPServer/{kube.ns}/outsider"]
        > settled["reconciles"][f"MCPServer/{kube.ns}/outsider"]
    )
    assert after_outsider["reconciles"][key] == count
    kube.cluster.kubectl(
        "patch", "-n", kube.ns, "mcpservers", "time", "--type=merge", "-p", '{"spec":{"args":["y"]}}'
    )
    after_member = operator.wait_idle()
    assert after_member["reconciles"][key] > count

    # Deleting the group fails the gateway (nothing to aggregate), and it recovers when it returns.
    kube.delete("MCPGroup", "team")
    failed = kube.wait_phase("VirtualMCPServer", "gw", "Failed")
    assert "MCPGroup team not found" in failed["message"] and "url" not in failed
    kube.apply(VMCP_SETUP.split("---")[0])
    wait_unreported(kube, "gw", backends=2)  # its backends again, not yet reported by the gateway
    report_healthy(kube, "gw")
    kube.cluster.wait_for(
        "vMCP back", lambda: kube.status("VirtualMCPServer", "gw").get("phase") in ("Ready", "Degraded")
    )

    # A tool filter edit reaches the gateway's ConfigMap (the gateway re-reads the mounted file and
    # applies it in place, tests/vmcp/test_live_config.py) without rolling the Deployment; an
    # operational edit still rolls it.
    def template_checksum() -> str:
        deployment = kube.get("Deployment", "vmcp-gw")
        assert deployment is not None
        return str(deployment["spec"]["template"]["metadata"]["annotations"]["mcpfleet.dev/config-checksum"])

    def rendered() -> str:
        return str(((kube.get("ConfigMap", "vmcp-gw-config") or {}).get("data") or {}).get("vmcp.yaml", ""))

    operator.wait_idle()
    before = template_checksum()
    live = {
        "spec": {"config": {"aggregation": {"tools": [{"workload": "time", "filter": ["get_current_time"]}]}}}
    }
    kube.cluster.kubectl(
        "patch", "-n", kube.ns, "virtualmcpservers", "gw", "--type=merge", "-p", json.dumps(live)
    )
    kube.cluster.wait_for("the filter in the gateway's ConfigMap", lambda: "get_current_time" in rendered())
    operator.wait_idle()
    assert template_checksum() == before
    restart = {"spec": {"config": {"operational": {"timeouts": {"default": "7s"}}}}}
    kube.cluster.kubectl(
        "patch", "-n", kube.ns, "virtualmcpservers", "gw", "--type=merge", "-p", json.dumps(restart)
    )
    kube.cluster.wait_for("an operational edit to roll the gateway", lambda: template_checksum() != before)


REGISTRY = """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPRegistry
metadata: {name: catalog}
spec:
  registries:
    - name: local
      configMapRef: {name: catalog-data, key: registry.json}
    - name: cluster
      kubernetes: {}
"""


def test_registry_flat_status_and_kubectl_wait(kube: Kube, operator: OperatorProcess) -> None:
    from mcpfleet.registry.config import RegistryConfig

    kube.apply(REGISTRY)
    kube.cluster.kubectl(
        "wait", "-n", kube.ns, "--for=condition=Ready", "mcpregistry/catalog", "--timeout=60s"
    )
    status = kube.status("MCPRegistry", "catalog")
    assert status["phase"] == "Running" and status["readyReplicas"] == 1 and status["observedGeneration"] == 1
    assert status["url"] == f"http://mcpreg-catalog.{kube.ns}.svc.cluster.local:8080"
    assert set(status) == {"phase", "message", "url", "readyReplicas", "observedGeneration", "conditions"}
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "Ready" and ready["observedGeneration"] == 1
    config_map = kube.get("ConfigMap", "mcpreg-catalog-config")
    assert config_map is not None
    config = RegistryConfig.model_validate(yaml.safe_load(config_map["data"]["registry.yaml"]))
    assert config.registryName == "catalog" and [s.kind for s in config.sources] == [
        "configMap",
        "kubernetes",
    ]
    role = kube.get("Role", "mcpreg-catalog")
    assert role is not None
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert {"configmaps", "mcpservers"} <= resources
    assert next(r for r in role["rules"] if r["resources"] == ["configmaps"])["resourceNames"] == [
        "catalog-data"
    ]

    # A spec the registry server cannot run (no such commit name): Failed, url cleared; fixed: Running again.
    kube.apply(
        REGISTRY.replace("kubernetes: {}", "git: {repository: 'https://git.example.com/r.git', commit: main}")
    )
    failed = kube.wait_phase("MCPRegistry", "catalog", "Failed", generation=2)
    assert "url" not in failed and "commit" in failed["message"]
    assert next(c for c in failed["conditions"] if c["type"] == "Ready")["status"] == "False"
    kube.apply(REGISTRY)
    kube.wait_phase("MCPRegistry", "catalog", "Running", generation=3)

    # A private git source: the password Secret key is a projected volume file the config points at.
    kube.apply(
        REGISTRY.replace(
            "kubernetes: {}",
            "git: {repository: 'https://git.example.com/r.git', auth: {username: u, passwordSecretRef: {name: s, key: k}}}",
        )
    )
    kube.wait_phase("MCPRegistry", "catalog", "Running", generation=4)
    config_map = kube.get("ConfigMap", "mcpreg-catalog-config")
    assert config_map is not None
    git = RegistryConfig.model_validate(yaml.safe_load(config_map["data"]["registry.yaml"])).sources[1].git
    assert git is not None and git.auth is not None and git.auth.username == "u"
    assert git.auth.password_file == "/etc/mcpfleet/secrets/git-cluster-password"
    deployment = kube.get("Deployment", "mcpreg-catalog")
    assert deployment is not None
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {"secret": {"name": "s", "items": [{"key": "k", "path": "git-cluster-password"}]}} in [
        source for v in volumes for source in v.get("projected", {}).get("sources", [])
    ]


PUBLISHING_REGISTRY = """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPRegistry
metadata: {name: published}
spec:
  registries:
    - name: local
      configMapRef: {name: catalog-data, key: registry.json}
  publish:
    oidcConfig:
      type: inline
      inline: {issuer: "https://id.example.com", audience: registry}
    grants:
      - {claims: {groups: platform}, publish: ["com.acme/*"]}
"""


def test_registry_publish_fields_reach_the_server_config(kube: Kube, operator: OperatorProcess) -> None:
    from mcpfleet.registry.config import RegistryConfig

    # Both an inline config and a reference: refused by the API server's own (CEL) validation.
    both = PUBLISHING_REGISTRY.replace(
        "    grants:", "    oidcConfigRef: {name: shared, audience: registry}\n    grants:"
    )
    refused = kube.cluster.kubectl("apply", "-n", kube.ns, "-f", "-", input=both, check=False)
    assert refused.returncode != 0 and "at most one of oidcConfig and oidcConfigRef" in refused.stderr
    # Published entries in an emptyDir would die with the pod: Failed, naming the fields.
    kube.apply(PUBLISHING_REGISTRY)
    failed = kube.wait_phase("MCPRegistry", "published", "Failed", generation=1)
    assert "spec.publish" in failed["message"] and "storage.persistentVolumeClaimName" in failed["message"]
    kube.apply(PUBLISHING_REGISTRY + "  storage: {persistentVolumeClaimName: published-data}\n")
    kube.cluster.wait_for("the registry Deployment", lambda: kube.get("Deployment", "mcpreg-published"))
    deployment = kube.get("Deployment", "mcpreg-published")
    assert deployment is not None
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {"claimName": "published-data"} in [v.get("persistentVolumeClaim") for v in volumes]
    config_map = kube.get("ConfigMap", "mcpreg-published-config")
    assert config_map is not None
    config = RegistryConfig.model_validate(yaml.safe_load(config_map["data"]["registry.yaml"]))
    assert config.publish is not None and config.publish.grants[0].publish == ["com.acme/*"]
    assert (
        config.publish.auth.oidc is not None and config.publish.auth.oidc.issuer == "https://id.example.com"
    )


def test_child_refused_by_the_api_server_fails_and_recovers(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(
        """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: sa}
spec: {image: "uvx://x", serviceAccount: "Not_A_Valid_Name"}
"""
    )
    failed = kube.wait_phase("MCPServer", "sa", "Failed")
    assert "refused a child" in failed["message"] and "url" not in failed
    kube.cluster.wait_for(
        "an ApplyFailed event", lambda: any(e["reason"] == "ApplyFailed" for e in kube.events("sa"))
    )
    kube.cluster.kubectl(
        "patch", "-n", kube.ns, "mcpservers", "sa", "--type=merge", "-p", '{"spec":{"serviceAccount":null}}'
    )
    assert kube.wait_phase("MCPServer", "sa", "Running", generation=2)["url"]
