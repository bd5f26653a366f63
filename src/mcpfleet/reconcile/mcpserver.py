"""Reconcile rules of MCPServer: what runs for one server, on either platform.

* stdio package (`uvx://`, `npx://`): the runner runs `mcpfleet proxy -- uvx PKG …` and serves it
  over HTTP (`/mcp` or `/sse` per `proxyMode`); capped at 1 replica with a `ReplicasCapped` condition.
* http package (streamable-http / sse): the package runs directly and listens on `mcpPort`.
* OCI image, http transport (Kubernetes only): the image runs directly, the Service targets `mcpPort`.
* OCI image, stdio transport (Kubernetes only): the image runs as its own container with stdin open;
  a runner container reaches it through the attach API (`mcpfleet proxy --attach NS/POD/mcp`), the
  pod name coming from the downward API; the Role allows `pods/attach` in the namespace.

The run config (ConfigMap / file `runconfig.json`) records what runs plus the configHash of the
referenced MCPToolConfig / MCPExternalAuthConfig, so a change to either rolls the pods. It never
holds secret values: those travel as secretKeyRef env.
"""

from __future__ import annotations

from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.meta import ConditionStatus
from mcpfleet.reconcile import configkinds
from mcpfleet.reconcile.common import (
    CONDITION_REPLICAS_CAPPED,
    LOCAL_OCI_PROBLEM,
    canonical_json,
    child_name,
    child_name_problem,
    group_condition,
    labels,
    package_command,
    plain_env,
    resources_dict,
    secret_env,
    service_hosts,
)
from mcpfleet.reconcile.model import ConfigFile, Container, RbacRule, WorkloadPlan, World

RUN_CONFIG = "runconfig.json"
SERVER_CONTAINER = "mcp"
PROXY_CONTAINER = "proxy"


def url_path(server: MCPServer) -> str:
    """The MCP endpoint path clients use: the proxy's mode for stdio, the server's transport otherwise."""
    mode = server.spec.proxy_mode if server.spec.transport == "stdio" else server.spec.transport
    return "/sse" if mode == "sse" else "/mcp"


def _problems(server: MCPServer, world: World) -> list[str]:
    spec = server.spec
    problems: list[str] = []
    if world.platform == "kubernetes":
        problems.extend(child_name_problem("MCPServer", server.name))
    if world.platform == "local" and not spec.is_package:
        problems.append(LOCAL_OCI_PROBLEM)
    if spec.tool_config_ref is not None and spec.tool_config_ref.name not in world.tool_configs:
        problems.append(f"toolConfigRef: MCPToolConfig {spec.tool_config_ref.name} not found")
    ref = spec.external_auth_config_ref
    if ref is not None and ref.name not in world.external_auth_configs:
        problems.append(f"externalAuthConfigRef: MCPExternalAuthConfig {ref.name} not found")
    if spec.oidc_config_ref is not None or (
        spec.oidc_config is not None and spec.oidc_config.type == "configMap"
    ):
        problems.append(
            "oidcConfigRef / oidcConfig.configMap: incoming OIDC for MCPServer is not supported yet"
        )
    return problems


def run_config(server: MCPServer, world: World) -> dict[str, object]:
    """What the run config file holds: the spec that shapes the process, and referenced config hashes."""
    spec = server.spec
    config: dict[str, object] = {
        "name": server.name,
        "namespace": server.namespace,
        "image": spec.image,
        "transport": spec.transport,
        "proxyMode": spec.proxy_mode,
        "args": list(spec.args or ()),
        "env": {e.name: e.value for e in spec.env or ()},
        "secretEnv": sorted(s.target_env_name or s.key for s in spec.secrets or ()),
    }
    if spec.group_ref is not None:
        config["groupRef"] = spec.group_ref
    if spec.tool_config_ref is not None and spec.tool_config_ref.name in world.tool_configs:
        tool_config = world.tool_configs[spec.tool_config_ref.name]
        config["toolConfig"] = {
            "name": tool_config.name,
            "configHash": configkinds.config_hash(tool_config),
            "spec": tool_config.spec.dump(),
        }
    ref = spec.external_auth_config_ref
    if ref is not None and ref.name in world.external_auth_configs:
        auth = world.external_auth_configs[ref.name]
        # Only the hash and the type: the spec names Secrets, their values never reach a ConfigMap.
        config["externalAuthConfig"] = {
            "name": auth.name,
            "type": auth.spec.type,
            "configHash": configkinds.config_hash(auth),
        }
    return config


def _containers(server: MCPServer, world: World) -> tuple[tuple[Container, ...], str, tuple[RbacRule, ...]]:
    spec = server.spec
    env = plain_env(spec.env)
    secrets = secret_env(spec.secrets)
    resources = resources_dict(spec.resources)
    kubernetes = world.platform == "kubernetes"
    allowed: tuple[str, ...] = ()
    if kubernetes:
        for host in service_hosts(child_name("MCPServer", server.name), server.namespace, spec.proxy_port):
            allowed += ("--allowed-host", host)
    if spec.transport != "stdio":
        port = spec.mcp_port or spec.proxy_port
        if spec.is_package:
            command = package_command(spec.image, spec.args)
            container = Container(
                name=SERVER_CONTAINER,
                command=command,
                port=port,
                fixed_port=True,
                env=env,
                secret_env=secrets,
                resources=resources,
            )
        else:
            container = Container(
                name=SERVER_CONTAINER,
                command=(),
                args=tuple(spec.args or ()),
                image=spec.image,
                port=port,
                fixed_port=True,
                env=env,
                secret_env=secrets,
                resources=resources,
            )
        return (container,), SERVER_CONTAINER, ()
    proxy = (
        "mcpfleet",
        "proxy",
        "--transport",
        spec.proxy_mode,
        "--host",
        "0.0.0.0",
        "--port",
        "{port}",
        *allowed,
    )
    if spec.is_package:
        container = Container(
            name=PROXY_CONTAINER,
            command=(*proxy, "--", *package_command(spec.image, spec.args)),
            port=spec.proxy_port,
            env=env,
            secret_env=secrets,
            resources=resources,
        )
        return (container,), PROXY_CONTAINER, ()
    # OCI image speaking stdio: its own container with stdin open, reached through pods/attach.
    server_container = Container(
        name=SERVER_CONTAINER,
        command=(),
        args=tuple(spec.args or ()),
        image=spec.image,
        env=env,
        secret_env=secrets,
        stdin=True,
        resources=resources,
    )
    runner = Container(
        name=PROXY_CONTAINER,
        command=(*proxy, "--attach", f"{server.namespace}/$(POD_NAME)/{SERVER_CONTAINER}"),
        port=spec.proxy_port,
        field_env=(("POD_NAME", "metadata.name"),),
    )
    rbac = (
        RbacRule(api_groups=("",), resources=("pods",), verbs=("get",)),
        RbacRule(api_groups=("",), resources=("pods/attach",), verbs=("create", "get")),
    )
    return (server_container, runner), PROXY_CONTAINER, rbac


def plan(server: MCPServer, world: World) -> WorkloadPlan:
    """What should run for `server` in `world` (pure: the same inputs give the same plan)."""
    spec = server.spec
    problems = _problems(server, world)
    conditions: list[tuple[str, ConditionStatus, str, str]] = list(group_condition(spec.group_ref, world))
    if spec.transport == "stdio":
        requested = 1 if spec.replicas is None else spec.replicas
        if requested > 1:
            conditions.append(
                (
                    CONDITION_REPLICAS_CAPPED,
                    "True",
                    "StdioSingleReplica",
                    f"stdio servers run at most 1 replica; {requested} requested, 1 runs",
                )
            )
        else:
            conditions.append(
                (
                    CONDITION_REPLICAS_CAPPED,
                    "False",
                    "StdioSingleReplica",
                    "stdio servers run at most 1 replica",
                )
            )
    if problems and world.platform == "local" and not spec.is_package:
        containers: tuple[Container, ...] = ()
        serving = None
        rbac: tuple[RbacRule, ...] = ()
    else:
        containers, serving, rbac = _containers(server, world)
    return WorkloadPlan(
        kind="MCPServer",
        name=server.name,
        namespace=server.namespace,
        replicas=spec.effective_replicas,
        containers=containers,
        serving_container=serving,
        url_path=url_path(server),
        # Only the proxy has /health; a server image run directly is probed on its TCP port.
        health_path="/health" if serving == PROXY_CONTAINER else "",
        config_files=(ConfigFile(RUN_CONFIG, canonical_json(run_config(server, world))),),
        rbac=rbac,
        service_account=spec.service_account,
        labels=labels("MCPServer", server.name, "mcp-server"),
        conditions=tuple(conditions),
        problems=tuple(problems),
        session_affinity=spec.session_affinity,
    )
