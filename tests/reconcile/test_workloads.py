"""Reconcile rules of the workload kinds: commands, containers, problems, conditions, checksums."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from mcpfleet.api.meta import WorkloadStatus
from mcpfleet.api.virtualmcpserver import VirtualMCPServerStatus
from mcpfleet.reconcile import mcpregistry, mcpremoteproxy, mcpserver, virtualmcpserver
from mcpfleet.reconcile.common import LOCAL_OCI_PROBLEM
from mcpfleet.reconcile.model import WorkloadObservation, World, secret_file_path
from mcpfleet.reconcile.status import workload_status
from mcpfleet.registry.config import RegistryConfig
from mcpfleet.vmcp.config import VMCPConfig
from tests.proxy_config import proxy_config

from .conftest import obj

TIME = """
kind: MCPServer
metadata: {name: time}
spec: {image: "uvx://mcp-server-time@2025.1", args: ["--local-timezone", "UTC"], groupRef: tools}
"""


def k8s(**kw: object) -> World:
    return World(platform="kubernetes", namespace="team", **kw)  # type: ignore[arg-type]


def local(**kw: object) -> World:
    return World(platform="local", namespace="team", **kw)  # type: ignore[arg-type]


def test_stdio_package_runs_under_the_proxy_locally() -> None:
    plan = mcpserver.plan(obj(TIME), local())
    assert plan.problems == ()
    (container,) = plan.containers
    assert container.command == (
        "mcpfleet",
        "proxy",
        "--config",
        "{config_dir}/proxy.json",
        "--host",
        "0.0.0.0",
        "--port",
        "{port}",
        "--",
        "uvx",
        "--",
        "mcp-server-time@2025.1",
        "--local-timezone",
        "UTC",
    )
    # Every other option is in the one config file (locally: no Service host names to accept).
    assert proxy_config(plan) == {"transport": "streamable-http"}
    assert plan.serving_container == container.name and plan.url_path == "/mcp" and plan.replicas == 1


def test_npx_package_and_sse_proxy_mode() -> None:
    server = obj(
        "kind: MCPServer\nmetadata: {name: e}\nspec: {image: 'npx://@scope/pkg@1.2.3', proxyMode: sse}"
    )
    plan = mcpserver.plan(server, local())
    assert plan.containers[0].command[-4:] == ("npx", "-y", "--", "@scope/pkg@1.2.3")
    assert plan.url_path == "/sse"


def test_kubernetes_stdio_package_accepts_service_hosts() -> None:
    plan = mcpserver.plan(obj(TIME), k8s())
    assert "mcp-time.team.svc.cluster.local:8080" in proxy_config(plan)["allowedHosts"]
    assert plan.containers[0].image is None  # the runner image


def test_oci_image_is_a_problem_locally_only() -> None:
    server = obj(
        "kind: MCPServer\nmetadata: {name: f}\n"
        "spec: {image: ghcr.io/acme/fetch:1, transport: streamable-http, mcpPort: 9000}"
    )
    assert mcpserver.plan(server, local()).problems == (LOCAL_OCI_PROBLEM,)
    assert LOCAL_OCI_PROBLEM.startswith("container images need Kubernetes")
    # With a container runtime it runs locally: the image itself, its mcpPort published (no proxy).
    local_plan = mcpserver.plan(server, local(container_runtime="podman"))
    assert local_plan.problems == ()
    (local_c,) = local_plan.containers
    assert local_c.command == () and local_c.image is None and local_c.local_image == "ghcr.io/acme/fetch:1"
    assert local_c.port == 9000 and local_c.fixed_port and local_plan.health_path == ""
    plan = mcpserver.plan(server, k8s())
    assert plan.problems == ()
    (container,) = plan.containers
    assert container.image == "ghcr.io/acme/fetch:1" and container.port == 9000 and container.fixed_port
    assert plan.health_path == ""


def test_oci_stdio_image_runs_through_the_local_runtime() -> None:
    server = obj(
        "kind: MCPServer\nmetadata: {name: git}\nspec:\n"
        "  image: ghcr.io/acme/git:1\n  args: [--repo, /r]\n"
        "  env: [{name: A, value: b}]\n  secrets: [{name: s, key: k, targetEnvName: TOKEN}]\n"
        "  permissionProfile: {type: builtin, name: none}\n"
        "  podTemplateSpec: {spec: {containers: [{name: mcp, command: [sh, -c, exec git-mcp]}]}}\n"
    )
    assert mcpserver.plan(server, local()).containers == ()
    plan = mcpserver.plan(server, local(container_runtime="podman"))
    assert plan.problems == ()
    (proxy,) = plan.containers
    assert proxy.command[:2] == ("mcpfleet", "proxy") and proxy.command[-1] == "--"
    assert proxy.local_image == "ghcr.io/acme/git:1" and proxy.args == ("--repo", "/r")
    assert proxy.local_entrypoint == ("sh", "-c", "exec git-mcp")
    assert proxy.local_image_env == ("A", "TOKEN")
    assert proxy.permission_profile is not None and proxy.permission_profile.network_mode == "none"
    assert plan.serving_container == proxy.name and plan.health_path == "/health"
    (permissions,) = [c for c in plan.conditions if c[0] == "Permissions"]
    assert permissions[3] == "builtin none: no network; files: the image's own, read-only (private /tmp)"
    (only_local,) = [c for c in plan.conditions if c[0] == "KubernetesOnly"]
    assert "except the `mcp` container's command" in only_local[3]
    # Kubernetes never sees the local form: the image is its own container there.
    assert all(c.local_image is None for c in mcpserver.plan(server, k8s()).containers)


def test_oci_stdio_image_is_attached_through_the_api() -> None:
    server = obj(
        "kind: MCPServer\nmetadata: {name: git}\nspec: {image: ghcr.io/acme/git:1, args: [--repo, /r]}"
    )
    plan = mcpserver.plan(server, k8s())
    server_c, runner = plan.containers
    assert server_c.stdin and server_c.image == "ghcr.io/acme/git:1" and server_c.args == ("--repo", "/r")
    assert "--" not in runner.command
    # The pod's own name comes from the downward API: the file names the variable, not the pod.
    assert proxy_config(plan)["attach"] == {"namespace": "team", "podFromEnv": "POD_NAME", "container": "mcp"}
    assert ("POD_NAME", "metadata.name") in runner.field_env
    assert any("pods/attach" in rule.resources for rule in plan.rbac)
    assert plan.serving_container == runner.name


def test_http_package_binds_its_own_port() -> None:
    server = obj(
        "kind: MCPServer\nmetadata: {name: h}\nspec: {image: 'uvx://srv', transport: sse, mcpPort: 8111}"
    )
    plan = mcpserver.plan(server, local())
    (container,) = plan.containers
    assert container.command == ("uvx", "--", "srv") and container.port == 8111 and container.fixed_port
    assert plan.url_path == "/sse"


def test_secrets_travel_as_secret_env_never_in_config() -> None:
    server = obj(
        "kind: MCPServer\nmetadata: {name: s}\nspec: {image: 'uvx://s', env: [{name: A, value: b}],"
        " secrets: [{name: creds, key: token, targetEnvName: TOKEN}]}"
    )
    plan = mcpserver.plan(server, k8s())
    (container,) = plan.containers
    assert container.env == (("A", "b"),)
    assert container.secret_env[0].env_name == "TOKEN" and container.secret_env[0].secret.name == "creds"
    run_config = json.loads(plan.config_files[0].content)
    assert run_config["secretEnv"] == ["TOKEN"] and "creds" not in plan.config_files[0].content


def test_group_condition_flips_when_the_group_goes() -> None:
    server = obj(TIME)
    group = obj("kind: MCPGroup\nmetadata: {name: tools}")
    with_group = mcpserver.plan(server, local(groups={"tools": group}))
    assert ("GroupRefValidated", "True", "GroupFound", "MCPGroup tools exists") in with_group.conditions
    without = mcpserver.plan(server, local())
    assert any(c[0] == "GroupRefValidated" and c[1] == "False" for c in without.conditions)


def test_missing_tool_config_is_a_problem_and_its_hash_rolls_the_config() -> None:
    server = obj("kind: MCPServer\nmetadata: {name: s}\nspec: {image: 'uvx://s', toolConfigRef: {name: tc}}")
    assert mcpserver.plan(server, k8s()).problems == ("toolConfigRef: MCPToolConfig tc not found",)
    tc1 = obj("kind: MCPToolConfig\nmetadata: {name: tc}\nspec: {toolsFilter: [a]}")
    tc2 = obj("kind: MCPToolConfig\nmetadata: {name: tc}\nspec: {toolsFilter: [a, b]}")
    p1 = mcpserver.plan(server, k8s(tool_configs={"tc": tc1}))
    p1again = mcpserver.plan(server, k8s(tool_configs={"tc": tc1}))
    p2 = mcpserver.plan(server, k8s(tool_configs={"tc": tc2}))
    assert p1.problems == ()
    assert p1.config_checksum == p1again.config_checksum != p2.config_checksum


TOOLS = "kind: MCPToolConfig\nmetadata: {name: tc}\nspec: {toolsFilter: [a], toolsOverride: {a: {name: b}}}"


def test_tool_config_ref_makes_the_proxy_read_the_run_config() -> None:
    from mcpfleet.platform.kubernetes.render import Owner, render
    from mcpfleet.proxy.runconfig import RunConfig

    server = obj(
        "kind: MCPServer\nmetadata: {name: s}\nspec: {image: 'uvx://s@1', args: [x], toolConfigRef: {name: tc}}"
    )
    for world in (local(tool_configs={"tc": obj(TOOLS)}), k8s(tool_configs={"tc": obj(TOOLS)})):
        plan = mcpserver.plan(server, world)
        (container,) = plan.containers
        assert proxy_config(plan)["runConfig"] == "runconfig.json"  # beside proxy.json
        assert container.command[-5:] == ("--", "uvx", "--", "s@1", "x")  # the package command stays last
        # What the proxy reads: the file the plan writes, with the MCPToolConfig's spec in it.
        (run_config,) = [c for c in plan.config_files if c.filename == "runconfig.json"]
        policy = RunConfig.model_validate(json.loads(run_config.content)).tool_policy()
        assert policy is not None and policy.allow == {"a"} and policy.original_name("b") == "a"
    manifests = render(plan, Owner("MCPServer", "s", "team", "uid-1"), k8s().images)
    pod = next(m for m in manifests if m["kind"] == "Deployment")["spec"]["template"]["spec"]
    (rendered,) = pod["containers"]
    assert "/etc/mcpfleet/config/proxy.json" in rendered["command"]
    assert {"name": "config", "mountPath": "/etc/mcpfleet/config", "readOnly": True} in rendered[
        "volumeMounts"
    ]
    # An OCI stdio image: the attaching runner reads it too.
    oci = obj(
        "kind: MCPServer\nmetadata: {name: s}\nspec: {image: 'ghcr.io/a/b:1', toolConfigRef: {name: tc}}"
    )
    assert (
        proxy_config(mcpserver.plan(oci, k8s(tool_configs={"tc": obj(TOOLS)})))["runConfig"]
        == "runconfig.json"
    )
    # Without a toolConfigRef the proxy reads no run config.
    assert "runConfig" not in proxy_config(mcpserver.plan(obj(TIME), k8s()))


def test_stdio_members_own_tool_config_is_left_to_their_proxy() -> None:
    stdio = obj(
        "kind: MCPServer\nmetadata: {name: time}\nspec: {image: 'uvx://t', groupRef: tools, toolConfigRef: {name: tc}}"
    )
    http = obj(
        "kind: MCPServer\nmetadata: {name: web}\nspec: {image: 'uvx://w', transport: streamable-http,"
        " mcpPort: 9000, groupRef: tools, toolConfigRef: {name: tc}}"
    )
    world = World(
        platform="kubernetes",
        namespace="team",
        groups={"tools": obj("kind: MCPGroup\nmetadata: {name: tools}")},
        servers=(stdio, http),
        tool_configs={"tc": obj(TOOLS)},
        backend_urls={"time": "http://t/mcp", "web": "http://w/mcp"},
    )
    document = yaml.safe_load(virtualmcpserver.plan(obj(VMCP), world).config_files[0].content)
    # The stdio server's proxy already filters and renames; the gateway applies the http server's.
    assert [(t["workload"], t["toolConfigRef"]) for t in document["aggregation"]["tools"]] == [
        ("web", {"name": "tc"})
    ]


def test_stdio_replicas_capped_condition() -> None:
    plan = mcpserver.plan(obj(TIME), k8s())
    capped = [c for c in plan.conditions if c[0] == "ReplicasCapped"]
    assert capped and capped[0][1] == "False"


def test_workload_status_url_only_while_running() -> None:
    plan = mcpserver.plan(obj(TIME), k8s())
    pending = workload_status(WorkloadStatus(), plan, WorkloadObservation(1, 0, "http://x/mcp"), 1, now="t0")
    assert pending.phase == "Pending" and pending.url is None
    running = workload_status(pending, plan, WorkloadObservation(1, 1, "http://x/mcp"), 1, now="t1")
    assert running.phase == "Running" and running.url == "http://x/mcp"
    again = workload_status(running, plan, WorkloadObservation(1, 1, "http://x/mcp"), 1, now="t2")
    assert again == running  # idle: equal, so nothing is written
    failed = workload_status(
        running, plan, WorkloadObservation(1, 0, None, failed=True, failure_message="boom"), 2
    )
    assert failed.phase == "Failed" and failed.url is None


def test_remote_proxy_headers_via_env() -> None:
    proxy = obj(
        "kind: MCPRemoteProxy\nmetadata: {name: r}\nspec: {remoteURL: 'https://mcp.example.com/mcp',"
        " headerForward: {addPlaintextHeaders: {X-Team: blue},"
        " addHeadersFromSecret: [{headerName: Authorization, valueSecretRef: {name: tok, key: t}}]}}"
    )
    plan = mcpremoteproxy.plan(proxy, local())
    (container,) = plan.containers
    assert container.command == (
        "mcpfleet",
        "proxy",
        "--config",
        "{config_dir}/proxy.json",
        "--host",
        "0.0.0.0",
        "--port",
        "{port}",
    )
    assert proxy_config(plan) == {
        "remoteFromEnv": "MCPFLEET_REMOTE_URL",
        "headersFromEnv": {"X-Team": "MCPFLEET_HEADER_0", "Authorization": "MCPFLEET_HEADER_1"},
    }
    assert container.env == (
        ("MCPFLEET_REMOTE_URL", "https://mcp.example.com/mcp"),
        ("MCPFLEET_HEADER_0", "blue"),
    )
    assert container.secret_env[0].secret.name == "tok"
    assert "tok" not in plan.config_files[0].content


def _vmcp_world(**kw: object) -> World:
    group = obj("kind: MCPGroup\nmetadata: {name: tools}")
    servers = (
        obj(TIME),
        obj("kind: MCPServer\nmetadata: {name: other}\nspec: {image: 'uvx://o', groupRef: elsewhere}"),
    )
    return World(
        platform="kubernetes",
        namespace="team",
        groups={"tools": group},
        servers=servers,
        backend_urls={"time": "http://time.team.svc.cluster.local:8080/mcp"},
        **kw,  # type: ignore[arg-type]
    )


VMCP = """
kind: VirtualMCPServer
metadata: {name: gw}
spec:
  config: {groupRef: tools, aggregation: {conflictResolution: prefix}}
  incomingAuth: {type: anonymous}
"""


def test_vmcp_config_lists_group_members_with_urls() -> None:
    plan = virtualmcpserver.plan(obj(VMCP), _vmcp_world())
    assert plan.problems == ()
    document = yaml.safe_load(plan.config_files[0].content)
    VMCPConfig.model_validate(document)
    assert [b["name"] for b in document["backends"]] == ["time"]
    assert document["backends"][0]["url"] == "http://time.team.svc.cluster.local:8080/mcp"
    assert "--status-resource" in plan.containers[0].command


VMCP_OPTIMIZER = """
kind: VirtualMCPServer
metadata: {name: gw}
spec:
  config:
    groupRef: tools
    optimizer:
      embeddingProvider: openai
      embeddingService: http://embed.team.svc.cluster.local:8080/v1
      embeddingModel: text-embedding-3-small
      maxToolsToReturn: 10
      hybridSearchSemanticRatio: "0.7"
    codeMode: {enabled: true, stepLimit: 5000, parallelMaxConcurrency: 4, toolCallTimeout: 10s}
  incomingAuth: {type: anonymous}
"""


@pytest.mark.parametrize("platform", ["kubernetes", "local"])
def test_vmcp_optimizer_and_code_mode_reach_the_gateway_config(platform: str) -> None:
    world = dataclasses.replace(_vmcp_world(), platform=platform)
    plan = virtualmcpserver.plan(obj(VMCP_OPTIMIZER), world)
    assert plan.problems == ()
    config = VMCPConfig.model_validate(yaml.safe_load(plan.config_files[0].content))
    assert config.optimizer is not None and config.optimizer.embedding_provider == "openai"
    assert (
        config.optimizer.max_tools_to_return == 10 and config.optimizer.hybrid_search_semantic_ratio == "0.7"
    )
    assert config.code_mode.enabled and config.code_mode.step_limit == 5000
    # Both apply live: editing them re-applies the file in place instead of restarting the gateway.
    edited = obj(VMCP_OPTIMIZER.replace("maxToolsToReturn: 10", "maxToolsToReturn: 3"))
    assert virtualmcpserver.plan(edited, world).rollout_checksum == plan.rollout_checksum


def test_vmcp_optimizer_field_rules() -> None:
    with pytest.raises(ValueError, match="embeddingModel"):
        obj(VMCP_OPTIMIZER.replace("      embeddingModel: text-embedding-3-small\n", ""))
    with pytest.raises(ValueError, match="maxToolsToReturn"):
        obj(VMCP_OPTIMIZER.replace("maxToolsToReturn: 10", "maxToolsToReturn: 51"))


def test_tracing_endpoint_reaches_only_the_data_plane_services() -> None:
    attributes = "k8s.namespace.name=team,mcpfleet.kind={kind},mcpfleet.name={name}"
    endpoint = "http://collector.obs:4318"
    gateway = virtualmcpserver.plan(obj(VMCP), _vmcp_world(otlp_endpoint=endpoint)).containers[0]
    assert gateway.env == (
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_RESOURCE_ATTRIBUTES", attributes.format(kind="VirtualMCPServer", name="gw")),
    )
    registry = mcpregistry.plan(obj(REGISTRY), k8s(otlp_endpoint=endpoint)).containers[0]
    assert dict(registry.env)["OTEL_EXPORTER_OTLP_ENDPOINT"] == endpoint
    # Not told: no tracing settings at all. A runner proxy is not traced.
    assert virtualmcpserver.plan(obj(VMCP), _vmcp_world()).containers[0].env == ()
    assert mcpregistry.plan(obj(REGISTRY), k8s()).containers[0].env == ()
    assert mcpserver.plan(obj(TIME), k8s(otlp_endpoint=endpoint)).containers[0].env == ()


def test_vmcp_missing_group_fails() -> None:
    plan = virtualmcpserver.plan(obj(VMCP), World(platform="kubernetes", namespace="team"))
    assert plan.problems == ("spec.config.groupRef: MCPGroup tools not found",)


def test_vmcp_external_auth_secret_via_env() -> None:
    auth = obj(
        "kind: MCPExternalAuthConfig\nmetadata: {name: hdr}\nspec: {type: headerInjection,"
        " headerInjection: {headerName: X-Key, valueSecretRef: {name: keys, key: k}}}"
    )
    vmcp = obj(
        VMCP.replace(
            "incomingAuth: {type: anonymous}",
            "incomingAuth: {type: anonymous}\n  outgoingAuth:"
            " {source: inline, backends: {time: {type: external_auth_config_ref,"
            " externalAuthConfigRef: {name: hdr}}}}",
        )
    )
    plan = virtualmcpserver.plan(vmcp, _vmcp_world(external_auth_configs={"hdr": auth}))
    assert plan.problems == ()
    document = yaml.safe_load(plan.config_files[0].content)
    injection = document["outgoingAuth"]["backends"]["time"]["headerInjection"]
    assert injection == {"headerName": "X-Key", "headerValueEnv": "MCPFLEET_SECRET_0"}
    assert plan.containers[0].secret_env[0].secret.name == "keys"


def test_vmcp_bearer_token_reaches_the_gateway_only_as_secret_env() -> None:
    auth = obj(
        "kind: MCPExternalAuthConfig\nmetadata: {name: bt}\nspec: {type: bearerToken,"
        " bearerToken: {tokenSecretRef: {name: api-token, key: token}}}"
    )
    vmcp = obj(
        VMCP.replace(
            "incomingAuth: {type: anonymous}",
            "incomingAuth: {type: anonymous}\n  outgoingAuth:"
            " {source: inline, default: {type: external_auth_config_ref, externalAuthConfigRef: {name: bt}},"
            " backends: {time: {type: external_auth_config_ref, externalAuthConfigRef: {name: bt}}}}",
        )
    )
    kubernetes = _vmcp_world(external_auth_configs={"bt": auth})
    # The local platform resolves the same secret env (from $MCPFLEET_SECRET_<NAME>_<KEY> or a file).
    for world in (kubernetes, dataclasses.replace(kubernetes, platform="local")):
        plan = virtualmcpserver.plan(vmcp, world)
        assert plan.problems == ()
        content = plan.config_files[0].content
        document = yaml.safe_load(content)
        config = VMCPConfig.model_validate(document)
        for strategy in (config.outgoing_auth.default, config.outgoing_auth.for_backend("time")):
            assert strategy.type == "bearer_token" and strategy.bearer_token is not None
            assert (
                strategy.bearer_token.token is None and strategy.bearer_token.token_env == "MCPFLEET_SECRET_0"
            )
        assert document["outgoingAuth"]["backends"]["time"] == {
            "type": "bearer_token",
            "authConfigRef": "bt",  # the gateway reports it in discoveredBackends[].authConfigRef
            "bearerToken": {"tokenEnv": "MCPFLEET_SECRET_0"},
        }
        # One env var for the one Secret key, used twice; the Secret's name never reaches the config.
        (secret,) = plan.containers[0].secret_env
        assert (secret.env_name, secret.secret.name, secret.secret.key) == (
            "MCPFLEET_SECRET_0",
            "api-token",
            "token",
        )
        assert "api-token" not in content


def test_vmcp_status_phases_and_counts_only_from_the_gateway() -> None:
    vmcp = obj(VMCP)
    world = _vmcp_world()
    plan = virtualmcpserver.plan(vmcp, world)
    pending = virtualmcpserver.status(
        VirtualMCPServerStatus(), vmcp, plan, WorkloadObservation(1, 0, None), world, now="t"
    )
    assert pending.phase == "Pending" and pending.tool_count is None and pending.url is None
    assert pending.backend_count == 1 and pending.discovered_backends[0].status == "unknown"
    observed = WorkloadObservation(1, 1, "http://gw/mcp")
    # The gateway reported its backends and counts.
    reported = pending.model_copy(
        update={
            "tool_count": 3,
            "discovered_backends": [
                pending.discovered_backends[0].model_copy(
                    update={"status": "healthy", "last_health_check": "t9"}
                )
            ],
        }
    )
    ready = virtualmcpserver.status(reported, vmcp, plan, observed, world, now="t")
    assert (
        ready.phase == "Ready"
        and ready.tool_count == 3
        and ready.discovered_backends[0].last_health_check == "t9"
    )
    assert virtualmcpserver.status(ready, vmcp, plan, observed, world, now="u") == ready
    unhealthy = ready.model_copy(
        update={
            "discovered_backends": [ready.discovered_backends[0].model_copy(update={"status": "unhealthy"})]
        }
    )
    assert virtualmcpserver.status(unhealthy, vmcp, plan, observed, world).phase == "Degraded"
    down = virtualmcpserver.status(ready, vmcp, plan, WorkloadObservation(1, 0, None), world)
    assert down.phase == "Pending" and down.tool_count is None


def test_vmcp_gateway_ready_only_once_it_reported_every_backend() -> None:
    """On both platforms: serving with a backend still `unknown` is Pending (its `tools/list` would
    lack that backend's tools); the gateway's report (a file locally, its status PATCH on
    Kubernetes) makes it Ready or Degraded."""
    vmcp = obj(VMCP)
    kubernetes = _vmcp_world()
    local = dataclasses.replace(kubernetes, platform="local")
    observed = WorkloadObservation(1, 1, "http://gw/mcp")
    for world in (kubernetes, local):
        plan = virtualmcpserver.plan(vmcp, world)
        serving = virtualmcpserver.status(VirtualMCPServerStatus(), vmcp, plan, observed, world, now="t")
        assert serving.discovered_backends[0].status == "unknown"
        assert serving.phase == "Pending" and serving.url == "http://gw/mcp"
        assert "waiting for the gateway to report backends: time" in (serving.message or "")
        (condition,) = [c for c in serving.conditions if c.type == "Ready"]
        assert condition.status == "False" and condition.reason == "BackendsNotReported"
        healthy = serving.model_copy(
            update={
                "discovered_backends": [
                    serving.discovered_backends[0].model_copy(update={"status": "healthy"})
                ]
            }
        )
        assert virtualmcpserver.status(healthy, vmcp, plan, observed, world, now="t").phase == "Ready"
        unhealthy = serving.model_copy(
            update={
                "discovered_backends": [
                    serving.discovered_backends[0].model_copy(update={"status": "unhealthy"})
                ]
            }
        )
        assert virtualmcpserver.status(unhealthy, vmcp, plan, observed, world, now="t").phase == "Degraded"


REGISTRY = """
kind: MCPRegistry
metadata: {name: catalog}
spec:
  registries:
    - {name: cm, configMapRef: {name: reg-data, key: registry.json}}
    - {name: upstream, api: {endpoint: "https://registry.example.com"}}
"""


def test_registry_config_is_validated_by_the_server_model() -> None:
    plan = mcpregistry.plan(obj(REGISTRY), k8s())
    assert plan.problems == ()
    document = yaml.safe_load(plan.config_files[0].content)
    config = RegistryConfig.model_validate(document)
    assert config.sources[0].config_map is not None and config.sources[0].config_map.namespace == "team"
    assert config.sources[1].format == "upstream"
    assert config.database.url == "sqlite+aiosqlite:////var/lib/mcpfleet/catalog.db"
    assert plan.rbac[0].resource_names == ("reg-data",)
    assert plan.data_dir == "/var/lib/mcpfleet"
    assert plan.health_path == "/readiness"  # the pod is ready once its sources have data


def test_registry_configmap_source_is_a_local_file() -> None:
    plan = mcpregistry.plan(obj(REGISTRY), local())
    assert plan.problems == ()
    config = RegistryConfig.model_validate(yaml.safe_load(plan.config_files[0].content))
    assert config.sources[0].config_map is None
    assert config.sources[0].file is not None and config.sources[0].file.path == "volumes/cm-cm/registry.json"
    (volume,) = [v for v in plan.volume_files if v.config_map == "reg-data"]
    assert volume.volume == "cm-cm" and volume.items == (("registry.json", "registry.json"),)
    assert plan.health_path == "/readiness" and plan.rbac == ()


PRIVATE_GIT = """
kind: MCPRegistry
metadata: {name: catalog}
spec:
  registries:
    - name: private
      git:
        repository: https://git.example.com/r.git
        branch: main
        auth: {username: reader, passwordSecretRef: {name: git-creds, key: token}}
    - {name: public, git: {repository: https://git.example.com/p.git}}
"""


def test_registry_private_git_password_is_a_mounted_secret_file() -> None:
    from mcpfleet.platform.kubernetes.render import Owner, render

    plan = mcpregistry.plan(obj(PRIVATE_GIT), k8s())
    assert plan.problems == ()
    content = plan.config_files[0].content
    config = RegistryConfig.model_validate(yaml.safe_load(content))
    private, public = config.sources
    assert private.git is not None and private.git.auth is not None and public.git is not None
    assert private.git.auth.username == "reader"
    assert private.git.auth.password_file == "/etc/mcpfleet/secrets/git-private-password"
    assert public.git.auth is None
    assert "git-creds" not in content and "token" not in content
    (secret_file,) = plan.secret_files
    assert secret_file.filename == "git-private-password"
    assert (secret_file.secret.name, secret_file.secret.key) == ("git-creds", "token")

    # Kubernetes: one projected Secret volume, the key at exactly the file the config names.
    manifests = render(plan, Owner("MCPRegistry", "catalog", "team", "uid-1"), k8s().images)
    deployment = next(m for m in manifests if m["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if "projected" in v]
    assert volume["projected"]["sources"] == [
        {"secret": {"name": "git-creds", "items": [{"key": "token", "path": "git-private-password"}]}}
    ]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    assert (
        mount["readOnly"] and f"{mount['mountPath']}/git-private-password" == private.git.auth.password_file
    )
    config_map = next(m for m in manifests if m["kind"] == "ConfigMap")
    assert "git-creds" not in json.dumps(config_map)

    # With PostgreSQL too: both Secret keys in the one volume.
    with_db = PRIVATE_GIT + "  databaseConfig: {dbAppUserPasswordSecretRef: {name: db, key: pw}}\n"
    assert [f.filename for f in mcpregistry.plan(obj(with_db), k8s()).secret_files] == [
        "git-private-password",
        "db-password",
    ]

    # Locally: the same SecretFile, the config naming it relative to the config dir (the runner writes it).
    local_plan = mcpregistry.plan(obj(PRIVATE_GIT), local())
    assert local_plan.problems == () and local_plan.secret_files == plan.secret_files
    local_config = RegistryConfig.model_validate(yaml.safe_load(local_plan.config_files[0].content))
    assert local_config.sources[0].git is not None and local_config.sources[0].git.auth is not None
    assert local_config.sources[0].git.auth.password_file == "secrets/git-private-password"


def test_registry_status_has_no_stopped_phase() -> None:
    registry = obj(REGISTRY.replace("spec:\n", "spec:\n  replicas: 0\n"))
    plan = mcpregistry.plan(registry, k8s())
    from mcpfleet.api.mcpregistry import MCPRegistryStatus

    status = mcpregistry.status(MCPRegistryStatus(), registry, plan, WorkloadObservation(0, 0, None))
    assert status.phase == "Pending"
    running_plan = mcpregistry.plan(obj(REGISTRY), k8s())
    running = mcpregistry.status(
        MCPRegistryStatus(), registry, running_plan, WorkloadObservation(1, 1, "http://c:8080")
    )
    assert running.phase == "Running" and running.url == "http://c:8080"
    assert running.conditions[0].reason == "Ready"


def test_vmcp_rolls_out_once_while_its_members_come_up() -> None:
    """The pod template's checksum ignores group members (the gateway follows them live), so a new
    VirtualMCPServer whose backends turn Ready one by one gets one ReplicaSet, not one per backend;
    an aggregation edit still changes it."""
    from mcpfleet.platform.kubernetes.render import Owner, render
    from mcpfleet.reconcile.model import Images

    starting = dataclasses.replace(_vmcp_world(), backend_urls={})
    before = virtualmcpserver.plan(obj(VMCP), starting)
    after = virtualmcpserver.plan(obj(VMCP), _vmcp_world())
    assert before.config_checksum != after.config_checksum  # the ConfigMap does change
    assert before.rollout_checksum == after.rollout_checksum

    def template_annotation(plan: object) -> str:
        assert isinstance(plan, type(after))
        owner = Owner("VirtualMCPServer", "gw", "team", "uid-1")
        (deployment,) = [m for m in render(plan, owner, Images()) if m["kind"] == "Deployment"]
        return str(deployment["spec"]["template"]["metadata"]["annotations"]["mcpfleet.dev/config-checksum"])

    assert template_annotation(before) == template_annotation(after)
    # Aggregation edits apply live in the gateway (tests/vmcp/test_live_config.py): no restart.
    edited = VMCP.replace(
        "aggregation: {conflictResolution: prefix}", "aggregation: {conflictResolution: manual}"
    )
    edited_plan = virtualmcpserver.plan(obj(edited), _vmcp_world())
    assert edited_plan.config_checksum != after.config_checksum  # the file the gateway re-reads changes
    assert edited_plan.rollout_checksum == after.rollout_checksum


def test_vmcp_live_edits_keep_the_rollout_checksum_and_the_rest_changes_it() -> None:
    """Tool filters / overrides / composite tools / MCPToolConfigs apply in place; incoming auth and
    operational settings still need a new process."""
    base = virtualmcpserver.plan(obj(VMCP), _vmcp_world())
    live = VMCP.replace(
        "aggregation: {conflictResolution: prefix}",
        "aggregation: {conflictResolution: prefix, tools: [{workload: time, filter: [now],"
        " overrides: {now: {name: clock}}}]}",
    )
    live_plan = virtualmcpserver.plan(obj(live), _vmcp_world())
    assert live_plan.problems == () and live_plan.config_checksum != base.config_checksum
    assert live_plan.rollout_checksum == base.rollout_checksum
    for restart in (
        VMCP.replace(
            "incomingAuth: {type: anonymous}",
            "incomingAuth: {type: oidc, oidcConfig: {type: inline, inline: {issuer: 'https://idp.example.com',"
            " audience: gw}}}",
        ),
        VMCP.replace(
            "aggregation: {conflictResolution: prefix}",
            "aggregation: {conflictResolution: prefix}, operational: {timeouts: {default: 7s}}",
        ),
    ):
        plan = virtualmcpserver.plan(obj(restart), _vmcp_world())
        assert plan.problems == () and plan.rollout_checksum != base.rollout_checksum, restart


PUBLISHING = """
kind: MCPRegistry
metadata: {name: catalog}
spec:
  registries:
    - {name: upstream, api: {endpoint: "https://registry.example.com"}}
  publish:
    oidcConfig:
      type: inline
      inline:
        issuer: https://id.example.com
        audience: registry
        clientSecretRef: {name: oidc, key: secret}
    grants:
      - {claims: {groups: platform}, publish: ["com.acme/*"]}
    precedence: last
"""


def test_registry_publish_token_login_settings_render_with_the_key_as_a_secret_file() -> None:
    """`mcp-publisher login`: the registry tokens' signing seed is a Secret key, mounted (Kubernetes)
    or written mode 0600 (locally) and named by path; `anonymousLogin` alone needs no issuer."""
    from mcpfleet.platform.kubernetes.render import Owner, render

    spec = (
        PUBLISHING
        + "    tokenSigningKeySecretRef: {name: registry-token, key: seed}\n"
        + "    anonymousLogin: true\n"
        + "  storage: {persistentVolumeClaimName: catalog-data}\n"
    )
    for world in (k8s(), local()):
        plan = mcpregistry.plan(obj(spec), world)
        assert plan.problems == ()
        config = RegistryConfig.model_validate(yaml.safe_load(plan.config_files[0].content))
        assert config.publish is not None and config.publish.anonymousLogin is True
        secret = next(f for f in plan.secret_files if f.filename == "registry-token-key")
        assert (secret.secret.name, secret.secret.key) == ("registry-token", "seed")
        assert config.publish.tokenSigningKeyFile == secret_file_path(world.platform, "registry-token-key")
    manifests = render(
        mcpregistry.plan(obj(spec), k8s()), Owner("MCPRegistry", "catalog", "team", "u"), k8s().images
    )
    pod = next(m for m in manifests if m["kind"] == "Deployment")["spec"]["template"]["spec"]
    sources = [s for v in pod["volumes"] for s in v.get("projected", {}).get("sources", [])]
    assert any(
        s.get("secret", {}).get("name") == "registry-token"
        and s["secret"]["items"] == [{"key": "seed", "path": "registry-token-key"}]
        for s in sources
    ), pod["volumes"]

    # A development registry: anonymous login and no issuer at all; neither is refused.
    dev = """
kind: MCPRegistry
metadata: {name: dev}
spec:
  registries:
    - {name: upstream, api: {endpoint: "https://registry.example.com"}}
  publish: {anonymousLogin: true}
"""
    plan = mcpregistry.plan(obj(dev), local())
    assert plan.problems == ()
    config = RegistryConfig.model_validate(yaml.safe_load(plan.config_files[0].content))
    assert config.publish is not None and config.publish.auth is None and config.publish.anonymousLogin
    with pytest.raises(ValueError, match="oidcConfig or oidcConfigRef"):
        obj(dev.replace("{anonymousLogin: true}", "{grants: []}"))


def test_registry_publish_renders_auth_grants_and_storage_on_both_platforms() -> None:
    from mcpfleet.platform.kubernetes.render import Owner, render

    # Kubernetes without databaseConfig or storage: published entries would die with the pod.
    bare = mcpregistry.plan(obj(PUBLISHING), k8s())
    assert any("spec.publish" in p and "storage.persistentVolumeClaimName" in p for p in bare.problems)

    spec = PUBLISHING + "  storage: {persistentVolumeClaimName: catalog-data}\n"
    plan = mcpregistry.plan(obj(spec), k8s())
    assert plan.problems == ()
    config = RegistryConfig.model_validate(yaml.safe_load(plan.config_files[0].content))
    assert config.publish is not None and config.publish.precedence == "last"
    assert config.publish.scope == "mcp-registry:publish"
    assert config.publish.grants[0].claims == {"groups": "platform"}
    assert config.publish.grants[0].publish == ["com.acme/*"]
    assert config.publish.auth is not None and config.publish.auth.oidc is not None
    assert config.publish.auth.oidc.audience == "registry"
    assert config.publish.anonymousLogin is False and config.publish.tokenSigningKeyFile is None
    # The client secret is secretKeyRef env, never in the config.
    assert "secret" not in plan.config_files[0].content.replace("clientSecretEnv", "")
    assert [e.env_name for e in plan.containers[0].secret_env] == ["MCPFLEET_OIDC_CLIENT_SECRET"]
    manifests = render(plan, Owner("MCPRegistry", "catalog", "team", "uid-1"), k8s().images)
    pod = next(m for m in manifests if m["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert any(v.get("persistentVolumeClaim") == {"claimName": "catalog-data"} for v in pod["volumes"])
    assert not any("emptyDir" in v for v in pod["volumes"])

    # With PostgreSQL the storage claim is not needed.
    with_db = PUBLISHING + "  databaseConfig: {dbAppUserPasswordSecretRef: {name: db, key: pw}}\n"
    assert mcpregistry.plan(obj(with_db), k8s()).problems == ()

    # Locally: the data directory persists; inline OIDC renders the same publish block.
    local_plan = mcpregistry.plan(obj(PUBLISHING), local())
    assert local_plan.problems == ()
    local_config = RegistryConfig.model_validate(yaml.safe_load(local_plan.config_files[0].content))
    assert local_config.publish == config.publish

    # An oidcConfigRef names a ConfigMap: mounted on Kubernetes, the local ConfigMap source locally.
    ref = PUBLISHING.replace(
        """    oidcConfig:
      type: inline
      inline:
        issuer: https://id.example.com
        audience: registry
        clientSecretRef: {name: oidc, key: secret}
""",
        "    oidcConfigRef: {name: shared-oidc, audience: registry}\n",
    )
    local_ref = mcpregistry.plan(obj(ref), local())
    assert local_ref.problems == () and [f.filename for f in local_ref.config_map_files] == ["oidc.json"]
    k8s_ref = mcpregistry.plan(obj(ref + "  storage: {persistentVolumeClaimName: d}\n"), k8s())
    assert k8s_ref.problems == () and [f.filename for f in k8s_ref.config_map_files] == ["oidc.json"]


VMCP_STATIC_ENTRY = """
kind: VirtualMCPServer
metadata: {name: gw}
spec:
  config:
    groupRef: tools
    aggregation: {defaultToolVisibility: deny, tools: [{workload: remote}]}
    audit: {enabled: true, includeResponseData: true, detectApplicationErrors: false, maxDelegationDepth: 3}
    backends:
      - {name: remote, url: "https://mcp.example.com/mcp", type: entry, caBundlePath: /etc/ca/ca.crt,
         metadata: {env: prod, group: mine, kind: mine}}
  incomingAuth: {type: anonymous}
"""


@pytest.mark.parametrize("platform", ["kubernetes", "local"])
def test_vmcp_static_entry_backend_visibility_and_audit_reach_the_gateway_config(platform: str) -> None:
    world = dataclasses.replace(_vmcp_world(), platform=platform)
    plan = virtualmcpserver.plan(obj(VMCP_STATIC_ENTRY), world)
    assert plan.problems == ()
    config = VMCPConfig.model_validate(yaml.safe_load(plan.config_files[0].content))
    remote = next(b for b in config.backends if b.name == "remote")
    assert remote.type == "entry" and remote.ca_bundle_path == "/etc/ca/ca.crt"
    # group and kind are mcpfleet's own keys: the user's values are replaced.
    assert remote.metadata == {"env": "prod", "group": "tools", "kind": "static"}
    assert config.aggregation.default_tool_visibility == "deny"
    assert config.audit is not None and config.audit.include_response_data
    assert not config.audit.detect_application_errors and config.audit.max_delegation_depth == 3
