"""`podTemplateSpec` (strategic merge onto the rendered pod) and `resourceOverrides` (labels,
annotations, pull secrets, proxy environment), asserted on the rendered Kubernetes objects and on the
local plan, from ToolHive's own v1beta1 examples."""

from __future__ import annotations

from typing import Any

import yaml

from mcpfleet.api.kinds import parse_manifest
from mcpfleet.platform.kubernetes.render import Owner, render
from mcpfleet.platform.kubernetes.render.podtemplate import strategic_merge
from mcpfleet.reconcile import mcpremoteproxy, mcpserver, virtualmcpserver
from mcpfleet.reconcile.model import World
from mcpfleet.reconcile.overrides import KUBERNETES_ONLY
from tests.reference import TOOLHIVE_EXAMPLES_V1BETA1


def k8s() -> World:
    return World(platform="kubernetes", namespace="team")


def local() -> World:
    return World(platform="local", namespace="team")


def toolhive(path: str, index: int = 0) -> Any:
    document = list(yaml.safe_load_all((TOOLHIVE_EXAMPLES_V1BETA1 / path).read_text()))[index]
    document["apiVersion"] = "mcpfleet.dev/v1beta1"
    document["metadata"]["namespace"] = "team"
    return parse_manifest(document)


def rendered(kind: str, plan: Any) -> dict[str, dict[str, Any]]:
    manifests = render(plan, Owner(kind, plan.name, "team", "uid-1"), k8s().images)
    return {m["kind"]: m for m in manifests}


def test_pod_template_spec_merges_onto_the_rendered_pod() -> None:
    server = toolhive("mcp-servers/mcpserver_with_pod_template.yaml")
    objects = rendered("MCPServer", mcpserver.plan(server, k8s()))
    template = objects["Deployment"]["spec"]["template"]
    pod = template["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux", "node-type": "mcp-server"}
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert pod["securityContext"]["runAsNonRoot"] is True
    containers = {c["name"]: c for c in pod["containers"]}
    # The `mcp` container is patched by name: ToolHive's resources and security context, our image
    # and command kept; any other container untouched.
    assert containers["mcp"]["resources"]["limits"] == {"cpu": "500m", "memory": "512Mi"}
    assert containers["mcp"]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert containers["mcp"]["image"] == "ghcr.io/stackloklabs/mcp-fetch:latest"
    plain = rendered(
        "MCPServer",
        mcpserver.plan(
            server.model_copy(update={"spec": server.spec.model_copy(update={"pod_template_spec": None})}),
            k8s(),
        ),
    )
    plain_containers = {c["name"]: c for c in plain["Deployment"]["spec"]["template"]["spec"]["containers"]}
    assert {k: v for k, v in containers.items() if k != "mcp"} == {
        k: v for k, v in plain_containers.items() if k != "mcp"
    }
    assert containers["mcp"].get("command") == plain_containers["mcp"].get("command")
    assert containers["mcp"]["ports"] == plain_containers["mcp"]["ports"]
    # The selector labels are ours whatever the patch says.
    assert (
        template["metadata"]["labels"].items()
        >= objects["Deployment"]["spec"]["selector"]["matchLabels"].items()
    )


def test_resource_overrides_reach_deployment_pods_service_and_proxy_env() -> None:
    server = toolhive("mcp-servers/mcpserver_with_resource_overrides.yaml")
    objects = rendered("MCPServer", mcpserver.plan(server, k8s()))
    deployment, service = objects["Deployment"], objects["Service"]
    assert deployment["metadata"]["annotations"]["monitoring.example.com/scrape"] == "true"
    assert deployment["metadata"]["labels"]["team"] == "platform"
    assert (
        service["metadata"]["annotations"]["external-dns.alpha.kubernetes.io/hostname"]
        == "github-mcp.example.com"
    )
    assert service["metadata"]["labels"]["environment"] == "production"
    proxy = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "proxy")
    assert {"name": "CUSTOM_PROXY_VAR", "value": "custom-value"} in proxy["env"]
    # Our own labels win over the user's on a clash (the selector and ownership must hold).
    assert deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "mcpfleet"


def test_local_platform_applies_proxy_env_and_says_what_it_does_not_use() -> None:
    server = toolhive("mcp-servers/mcpserver_with_resource_overrides.yaml")
    server = server.model_copy(
        update={"spec": server.spec.model_copy(update={"image": "uvx://mcp-server-time"})}
    )
    plan = mcpserver.plan(server, local())
    proxy = next(c for c in plan.containers if c.name == "proxy")
    assert ("CUSTOM_PROXY_VAR", "custom-value") in proxy.env
    (condition,) = [c for c in plan.conditions if c[0] == KUBERNETES_ONLY]
    assert "spec.resourceOverrides" in condition[3]
    plain = mcpserver.plan(
        server.model_copy(update={"spec": server.spec.model_copy(update={"resource_overrides": None})}),
        local(),
    )
    assert not [c for c in plain.conditions if c[0] == KUBERNETES_ONLY]


def test_gateway_and_remote_proxy_take_a_pod_template() -> None:
    gateway = parse_manifest(
        {
            "apiVersion": "mcpfleet.dev/v1beta1",
            "kind": "VirtualMCPServer",
            "metadata": {"name": "gw", "namespace": "team"},
            "spec": {
                "groupRef": {"name": "tools"},
                "incomingAuth": {"type": "anonymous"},
                # ToolHive's vmcp_production_full.yaml pod template, aimed at our container's name.
                "podTemplateSpec": {
                    "spec": {
                        "affinity": {
                            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}
                        },
                        "containers": [{"name": "vmcp", "resources": {"limits": {"memory": "1Gi"}}}],
                    }
                },
            },
        }
    )
    objects = rendered("VirtualMCPServer", virtualmcpserver.plan(gateway, k8s()))
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert "podAntiAffinity" in pod["affinity"]
    (vmcp,) = pod["containers"]
    assert vmcp["resources"]["limits"] == {"memory": "1Gi"} and vmcp["image"]
    proxy = parse_manifest(
        {
            "apiVersion": "mcpfleet.dev/v1beta1",
            "kind": "MCPRemoteProxy",
            "metadata": {"name": "rp", "namespace": "team"},
            "spec": {
                "remoteUrl": "https://example.com/mcp",
                "podTemplateSpec": {"spec": {"priorityClassName": "high"}},
                "resourceOverrides": {"proxyDeployment": {"imagePullSecrets": [{"name": "regcred"}]}},
            },
        }
    )
    objects = rendered("MCPRemoteProxy", mcpremoteproxy.plan(proxy, k8s()))
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "high" and pod["imagePullSecrets"] == [{"name": "regcred"}]


def test_gateway_session_affinity_and_pull_secrets() -> None:
    """VirtualMCPServer `sessionAffinity` (ToolHive's default ClientIP) and `imagePullSecrets`, with a
    pod template's pull secrets merged onto them."""

    def gateway(extra: dict[str, Any]) -> Any:
        spec = {"groupRef": {"name": "tools"}, "incomingAuth": {"type": "anonymous"}, **extra}
        return parse_manifest(
            {
                "apiVersion": "mcpfleet.dev/v1beta1",
                "kind": "VirtualMCPServer",
                "metadata": {"name": "gw", "namespace": "team"},
                "spec": spec,
            }
        )

    default = rendered("VirtualMCPServer", virtualmcpserver.plan(gateway({}), k8s()))
    assert default["Service"]["spec"]["sessionAffinity"] == "ClientIP"
    assert "imagePullSecrets" not in default["Deployment"]["spec"]["template"]["spec"]
    objects = rendered(
        "VirtualMCPServer",
        virtualmcpserver.plan(
            gateway(
                {
                    "sessionAffinity": "None",
                    "imagePullSecrets": [{"name": "regcred"}],
                    "podTemplateSpec": {"spec": {"imagePullSecrets": [{"name": "other"}]}},
                }
            ),
            k8s(),
        ),
    )
    assert objects["Service"]["spec"]["sessionAffinity"] == "None"
    pulled = objects["Deployment"]["spec"]["template"]["spec"]["imagePullSecrets"]
    assert {p["name"] for p in pulled} == {"regcred", "other"}


def test_strategic_merge_rules() -> None:
    base = {
        "containers": [
            {"name": "mcp", "image": "a", "env": [{"name": "X", "value": "1"}]},
            {"name": "proxy"},
        ],
        "tolerations": [{"key": "a"}],
        "nodeSelector": {"a": "1"},
    }
    patch = {
        "containers": [
            {"name": "mcp", "env": [{"name": "Y", "value": "2"}, {"name": "X", "value": "3"}]},
            {"name": "proxy", "$patch": "delete"},
            {"name": "sidecar", "image": "s"},
        ],
        "tolerations": [{"key": "b"}],
        "nodeSelector": {"a": None, "b": "2"},
    }
    merged = strategic_merge(base, patch)
    assert merged["containers"] == [
        {"name": "mcp", "image": "a", "env": [{"name": "X", "value": "3"}, {"name": "Y", "value": "2"}]},
        {"name": "sidecar", "image": "s"},
    ]
    assert merged["tolerations"] == [{"key": "b"}]  # no merge key: replaced
    assert merged["nodeSelector"] == {"b": "2"}  # null deletes
    assert base["nodeSelector"] == {"a": "1"}  # inputs untouched
    assert strategic_merge({"a": {"x": 1}}, {"a": {"$patch": "replace", "y": 2}}) == {"a": {"y": 2}}


def test_pod_template_spec_is_bounded_and_shaped() -> None:
    import pytest

    from mcpfleet.api.kinds import ManifestError

    def server(template: Any) -> dict[str, Any]:
        return {
            "apiVersion": "mcpfleet.dev/v1beta1",
            "kind": "MCPServer",
            "metadata": {"name": "s"},
            "spec": {"image": "uvx://x", "podTemplateSpec": template},
        }

    for template in ({"kind": "Pod"}, {"spec": []}, {"spec": {"x": "y" * 70000}}):
        with pytest.raises(ManifestError) as caught:
            parse_manifest(server(template))
        assert caught.value.problems[0][0] == "spec.podTemplateSpec"


def test_restart_strategy_annotations_restart_the_workload() -> None:
    """ToolHive's mcpserver_with_restart_strategy.yaml: a new restarted-at value is a new process (local)
    and a new pod template (Kubernetes); `immediate` replaces every pod at once."""
    server = toolhive("mcp-servers/mcpserver_with_restart_strategy.yaml")
    before = rendered("MCPServer", mcpserver.plan(server, k8s()))["Deployment"]
    annotations = {"mcpserver.toolhive.stacklok.dev/restarted-at": "2026-12-01T19:00:00Z"}
    restarted = server.model_copy(
        update={"metadata": server.metadata.model_copy(update={"annotations": annotations})}
    )
    after = rendered("MCPServer", mcpserver.plan(restarted, k8s()))["Deployment"]
    assert before["spec"]["template"] != after["spec"]["template"]
    assert "strategy" not in after["spec"]
    immediate = restarted.model_copy(
        update={
            "metadata": server.metadata.model_copy(
                update={
                    "annotations": {
                        **annotations,
                        "mcpserver.toolhive.stacklok.dev/restart-strategy": "immediate",
                    }
                }
            )
        }
    )
    assert rendered("MCPServer", mcpserver.plan(immediate, k8s()))["Deployment"]["spec"]["strategy"] == {
        "type": "Recreate"
    }
    package = restarted.model_copy(
        update={"spec": restarted.spec.model_copy(update={"image": "uvx://mcp-server-time"})}
    )
    local_plan = mcpserver.plan(package, local())
    assert all(("MCPFLEET_RESTARTED_AT", "2026-12-01T19:00:00Z") in c.env for c in local_plan.containers)
    assert not [c for c in local_plan.conditions if c[0] == KUBERNETES_ONLY]
