"""Reconcile rules of MCPServer: what runs for one server, on either platform.

* stdio package (`uvx://`, `npx://`): the runner runs `mcpfleet proxy -- uvx PKG …` and serves it
  over HTTP (`/mcp` or `/sse` per `proxyMode`); capped at 1 replica with a `ReplicasCapped` condition.
* http package (streamable-http / sse): the package runs directly and listens on `mcpPort`.
* OCI image, http transport (Kubernetes only): the image runs directly, the Service targets `mcpPort`.
* OCI image, stdio transport: on Kubernetes the image runs as its own container with stdin open;
  a runner container reaches it through the attach API (`mcpfleet proxy --attach NS/POD/mcp`), the
  pod name coming from the downward API; the Role allows `pods/attach` in the namespace. Locally,
  with a container runtime on the machine (`World.container_runtime`), the proxy's child is the
  image (`Container.local_image`), which the platform runs through that runtime under the server's
  permission profile; the `mcp` container's `command` in `podTemplateSpec` (the same override that
  Kubernetes merges into the pod) replaces the image's entrypoint there too. An image with an http
  transport runs the same way without the proxy, its `mcpPort` published on 127.0.0.1 (or behind the
  auth proxy, as on Kubernetes). Without a runtime, the local plan is a problem.

`authzConfig` (Cedar) and `audit` (`reconcile/policy.py`) are enforced by the proxy as well
(`--authz-config`, `--audit-config`); an http server then runs behind one, as with OIDC below. So
are the webhooks of a `webhookConfigRef` (`reconcile/mcpwebhookconfig.py`: `--webhook-config`, the
Secret keys as SecretFiles mounted into the proxy only), and the OAuth 2.1 authorization server of an
`externalAuthConfigRef` of type `embeddedAuthServer` (`reconcile/authserver.py`: `--authserver-config`).

Incoming OIDC (`oidcConfig` / `oidcConfigRef`, see `reconcile/oidc.py`) is enforced by the proxy
(`--auth-config {config_dir}/auth.json`). An http server has no proxy of its own, so with OIDC one
runs beside it (`mcpfleet proxy --remote http://127.0.0.1:MCPPORT --forward-all-paths`) and the
Service targets it; that needs an `mcpPort` different from `proxyPort`, else a plan problem. Never
does a server configured with OIDC run without it.

The run config (file `runconfig.json`) records what runs plus the configHash of the referenced
MCPToolConfig / MCPExternalAuthConfig, so a change to either rolls the pods (it is part of the pod
template's checksum; on Kubernetes it becomes a ConfigMap only when the proxy is told to read it). It never
holds secret values: those travel as secretKeyRef env. With a `toolConfigRef` it also holds that
MCPToolConfig's spec, and a stdio server's proxy gets `--run-config {config_dir}/runconfig.json`
and enforces the filter and overrides itself. An http server has no relay that could: its
toolConfigRef is applied only by a vMCP gateway over its group (docs/operator.md, Known limits).
The same holds for `rateLimiting`: the stdio proxy enforces it (from the run config; Redis-shared
buckets with a redis `sessionStorage`, whose password comes as secretKeyRef env); an http server
with rateLimiting is a plan problem.
"""

from __future__ import annotations

from dataclasses import replace

from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.meta import ConditionStatus
from mcpfleet.reconcile import (
    authserver,
    configkinds,
    enforce,
    mcpauthzconfig,
    mcpoidcconfig,
    mcptelemetryconfig,
    mcpwebhookconfig,
    permissions,
)
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
    redis_password_env,
    resources_dict,
    secret_env,
    service_hosts,
)
from mcpfleet.reconcile.model import ConfigFile, Container, RbacRule, WorkloadPlan, World
from mcpfleet.reconcile.oidc import AUTH_CONFIG, IncomingAuthPlan, proxy_args
from mcpfleet.reconcile.overrides import kubernetes_overrides, local_condition, with_proxy_env, with_restart
from mcpfleet.reconcile.policy import PolicyPlan, ignored_primary_upstream

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
    if _local_refused(server, world):
        problems.append(LOCAL_OCI_PROBLEM)
    problems.extend(configkinds.missing_refs(spec.tool_config_ref, spec.external_auth_config_ref, world))
    auth = _auth(server, world)
    problems.extend(auth.problems)
    problems.extend(_policy(server, world).problems)
    problems.extend(_webhooks(server, world).problems)
    problems.extend(_authserver(server, world).problems)
    problems.extend(permissions.resolve(server, world).problems)
    if spec.rate_limiting is not None and spec.transport != "stdio":
        problems.append(
            "spec.rateLimiting: enforced by mcpfleet's proxy, which only stdio servers run behind; put an"
            " http server behind a VirtualMCPServer with config.rateLimiting instead"
        )
    if _no_port_for_auth_proxy(server, world):
        problems.append(
            "spec.mcpPort: with incoming OIDC an http server runs behind the auth proxy (so does one with"
            f" authzConfig, audit or webhookConfigRef), which listens on proxyPort ({spec.proxy_port}): set mcpPort to the port"
            " the server listens on, a different one"
        )
    return problems


def _local_refused(server: MCPServer, world: World) -> bool:
    """An image this machine cannot run: there is no container runtime."""
    spec = server.spec
    return world.platform == "local" and not spec.is_package and world.container_runtime is None


def local_entrypoint(server: MCPServer) -> tuple[str, ...]:
    """The `command` of the `mcp` container in `podTemplateSpec` (strings only), else ()."""
    template = server.spec.pod_template_spec or {}
    pod = template.get("spec") if isinstance(template, dict) else None
    containers = pod.get("containers") if isinstance(pod, dict) else None
    for container in containers if isinstance(containers, list) else []:
        if isinstance(container, dict) and container.get("name") == SERVER_CONTAINER:
            command = container.get("command")
            if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
                return tuple(command)
    return ()


def _policy(server: MCPServer, world: World) -> PolicyPlan:
    spec = server.spec
    return mcpauthzconfig.policy(spec.authz_config, spec.authz_config_ref, spec.audit, world)


def _webhooks(server: MCPServer, world: World) -> mcpwebhookconfig.WebhookPlan:
    spec = server.spec
    return mcpwebhookconfig.plan(
        spec.webhook_config_ref, world, server_name=server.name, transport=spec.transport
    )


def _authserver(server: MCPServer, world: World) -> authserver.AuthServerPlan:
    incoming = _auth(server, world).document is not None
    spec = server.spec
    return authserver.workload_plan(
        spec.auth_server_ref, spec.external_auth_config_ref, world, incoming_oidc=incoming
    )


def _fronted(server: MCPServer, world: World) -> bool:
    """An http server that needs the proxy in front of it: incoming OIDC, an embedded authorization
    server, authorization, audit or webhooks."""
    return (
        _auth(server, world).document is not None
        or _authserver(server, world).settings is not None
        or _policy(server, world).active
        or _webhooks(server, world).active
    )


def _auth(server: MCPServer, world: World) -> IncomingAuthPlan:
    return mcpoidcconfig.workload_auth(server.spec.oidc_config, server.spec.oidc_config_ref, world)


def _no_port_for_auth_proxy(server: MCPServer, world: World) -> bool:
    """An http server with OIDC needs its own mcpPort; on Kubernetes the proxy in front holds proxyPort."""
    spec = server.spec
    if spec.transport == "stdio" or not _fronted(server, world):
        return False
    return spec.mcp_port is None or (world.platform == "kubernetes" and spec.mcp_port == spec.proxy_port)


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
    if spec.rate_limiting is not None:
        # The proxy enforces them; the Redis password is never here (secretKeyRef env).
        config["rateLimiting"] = spec.rate_limiting.dump()
        if spec.session_storage is not None:
            config["sessionStorage"] = spec.session_storage.dump()
    config.update(configkinds.run_config_refs(spec.tool_config_ref, spec.external_auth_config_ref, world))
    return config


def _containers(server: MCPServer, world: World) -> tuple[tuple[Container, ...], str, tuple[RbacRule, ...]]:
    containers, serving, rbac = _unconfined_containers(server, world)
    if world.platform == "local":
        # An http server's image (its own container on Kubernetes) runs through the local runtime.
        containers = tuple(
            replace(
                c,
                image=None,
                local_image=c.image,
                local_entrypoint=local_entrypoint(server),
                local_image_env=tuple(name for name, _ in c.env) + tuple(s.env_name for s in c.secret_env),
            )
            if c.image is not None
            else c
            for c in containers
        )
    # The profile goes on the container that runs the server itself (a stdio package: the proxy's
    # child; an image or an http package: the mcp container), never on a proxy beside it.
    profile = permissions.resolve(server, world).profile
    proxy_env = permissions.egress_proxy_env(server, world, profile)
    server_container = SERVER_CONTAINER if any(c.name == SERVER_CONTAINER for c in containers) else serving
    containers = tuple(
        replace(c, permission_profile=profile, env=c.env + proxy_env) if c.name == server_container else c
        for c in containers
    )
    return containers, serving, rbac


def _unconfined_containers(
    server: MCPServer, world: World
) -> tuple[tuple[Container, ...], str, tuple[RbacRule, ...]]:
    spec = server.spec
    env = plain_env(spec.env)
    secrets = secret_env(spec.secrets)
    resources = resources_dict(spec.resources)
    kubernetes = world.platform == "kubernetes"
    allowed: tuple[str, ...] = ()
    if kubernetes:
        for host in service_hosts(child_name("MCPServer", server.name), server.namespace, spec.proxy_port):
            allowed += ("--allowed-host", host)
    auth = _auth(server, world)
    policy = _policy(server, world)
    if spec.transport != "stdio" and _fronted(server, world):
        return _behind_auth_proxy(
            server, auth, policy, _webhooks(server, world), allowed, _authserver(server, world)
        )
    # The proxy enforces incoming auth: its settings in auth.json, the client secret as env; and
    # the authorization policies and audit (authz.json, audit.json).
    auth_args = (
        proxy_args(auth)
        + _authserver(server, world).proxy_args()
        + policy.proxy_args()
        + _webhooks(server, world).proxy_args()
    )
    # ...and the MCPToolConfig, which it reads from the run config (only given when one is referenced).
    run_config_args = (
        ("--run-config", f"{{config_dir}}/{RUN_CONFIG}") if spec.tool_config_ref or spec.rate_limiting else ()
    )
    # sessionStorage's password, for the proxy's Redis-shared rate-limit buckets.
    redis_env = redis_password_env(spec.session_storage) if spec.rate_limiting else ()
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
        *auth_args,
        *run_config_args,
    )
    if spec.is_package:
        container = Container(
            name=PROXY_CONTAINER,
            command=(*proxy, "--", *package_command(spec.image, spec.args)),
            port=spec.proxy_port,
            env=env,
            secret_env=secrets + auth.secret_env + redis_env,
            resources=resources,
            service_account_token=auth.service_account_token,
        )
        return (container,), PROXY_CONTAINER, ()
    if not kubernetes:
        # Locally: the proxy's child is the image, run by the machine's container runtime.
        container = Container(
            name=PROXY_CONTAINER,
            command=(*proxy, "--"),
            port=spec.proxy_port,
            args=tuple(spec.args or ()),
            env=env,
            secret_env=secrets + auth.secret_env + redis_env,
            resources=resources,
            local_image=spec.image,
            local_entrypoint=local_entrypoint(server),
            local_image_env=tuple(name for name, _ in env) + tuple(s.env_name for s in secrets),
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
        secret_files=False,
    )
    runner = Container(
        name=PROXY_CONTAINER,
        command=(*proxy, "--attach", f"{server.namespace}/$(POD_NAME)/{SERVER_CONTAINER}"),
        port=spec.proxy_port,
        field_env=(("POD_NAME", "metadata.name"),),
        secret_env=auth.secret_env + redis_env,
        service_account_token=auth.service_account_token,
    )
    rbac = (
        RbacRule(api_groups=("",), resources=("pods",), verbs=("get",)),
        RbacRule(api_groups=("",), resources=("pods/attach",), verbs=("create", "get")),
    )
    return (server_container, runner), PROXY_CONTAINER, rbac


def _behind_auth_proxy(
    server: MCPServer,
    auth: IncomingAuthPlan,
    policy: PolicyPlan,
    webhooks: mcpwebhookconfig.WebhookPlan,
    allowed: tuple[str, ...],
    embedded: authserver.AuthServerPlan,
) -> tuple[tuple[Container, ...], str, tuple[RbacRule, ...]]:
    """An http server with incoming OIDC, authzConfig or audit: it has none of its own, so `mcpfleet proxy --remote`
    runs beside it in the pod, checks every request and forwards it (every path: /mcp, or /sse and
    its /messages/) to the server on 127.0.0.1:mcpPort; the Service targets the proxy."""
    spec = server.spec
    assert spec.mcp_port is not None  # else a plan problem (see _problems)
    env = plain_env(spec.env)
    resources = resources_dict(spec.resources)
    server_container = Container(
        name=SERVER_CONTAINER,
        command=package_command(spec.image, spec.args) if spec.is_package else (),
        args=() if spec.is_package else tuple(spec.args or ()),
        image=None if spec.is_package else spec.image,
        port=spec.mcp_port,
        fixed_port=True,
        env=env,
        secret_env=secret_env(spec.secrets),
        resources=resources,
        secret_files=False,
    )
    proxy = Container(
        name=PROXY_CONTAINER,
        command=(
            "mcpfleet",
            "proxy",
            "--remote",
            f"http://127.0.0.1:{spec.mcp_port}",
            "--forward-all-paths",
            "--host",
            "0.0.0.0",
            "--port",
            "{port}",
            *allowed,
            *proxy_args(auth),
            *embedded.proxy_args(),
            *policy.proxy_args(),
            *webhooks.proxy_args(),
        ),
        port=spec.proxy_port,
        secret_env=auth.secret_env,
        service_account_token=auth.service_account_token,
    )
    return (server_container, proxy), PROXY_CONTAINER, ()


def plan(server: MCPServer, world: World) -> WorkloadPlan:
    """What should run for `server` in `world` (pure: the same inputs give the same plan)."""
    spec = server.spec
    problems = _problems(server, world)
    conditions: list[tuple[str, ConditionStatus, str, str]] = list(group_condition(spec.group_ref, world))
    verdict = enforce.check(spec.image, server.metadata.labels or {}, world.registry_images)
    if verdict.problem is not None:
        problems.append(verdict.problem)
    if verdict.condition is not None:
        conditions.append(verdict.condition)
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
    auth = _auth(server, world)
    policy = _policy(server, world)
    webhooks = _webhooks(server, world)
    embedded = _authserver(server, world)
    profile = permissions.resolve(server, world)
    local_image = world.platform == "local" and not spec.is_package and not _local_refused(server, world)
    conditions.append(profile.condition(image=local_image))
    # Never run without the auth / policies / webhooks the spec asks for.
    if problems and (
        auth.problems
        or embedded.problems
        or policy.problems
        or webhooks.problems
        or _local_refused(server, world)
        or profile.problems
    ):
        containers: tuple[Container, ...] = ()
        serving = None
        rbac: tuple[RbacRule, ...] = ()
    elif _no_port_for_auth_proxy(server, world):
        containers, serving, rbac = (), None, ()
    else:
        containers, serving, rbac = _containers(server, world)
    config_files = [ConfigFile(RUN_CONFIG, canonical_json(run_config(server, world)))]
    if auth.document is not None:
        config_files.append(ConfigFile(AUTH_CONFIG, canonical_json(auth.document)))
    config_files.extend(policy.proxy_files())
    config_files.extend(webhooks.proxy_files())
    config_files.extend(embedded.proxy_files())
    containers = with_proxy_env(containers, PROXY_CONTAINER, spec.resource_overrides)
    containers, immediate = with_restart(containers, server.metadata.annotations)
    k8s_overrides = kubernetes_overrides(spec.pod_template_spec, spec.resource_overrides, immediate)
    image_command = any(c.local_entrypoint for c in containers)
    conditions += local_condition(
        world, k8s_overrides, "the `mcp` container's command: the image's entrypoint" if image_command else ""
    )
    conditions += ignored_primary_upstream(spec.authz_config, "spec.authzConfig")
    workload = WorkloadPlan(
        kind="MCPServer",
        name=server.name,
        namespace=server.namespace,
        replicas=spec.effective_replicas,
        containers=containers,
        serving_container=serving,
        url_path=url_path(server),
        # Only the proxy has /health; a server image run directly is probed on its TCP port.
        health_path="/health" if serving == PROXY_CONTAINER else "",
        config_files=tuple(config_files),
        config_map_files=auth.config_map_files + policy.config_map_files if serving is not None else (),
        secret_files=webhooks.secret_files + embedded.secret_files if serving is not None else (),
        rbac=rbac,
        service_account=spec.service_account,
        labels=labels("MCPServer", server.name, "mcp-server"),
        conditions=tuple(conditions),
        problems=tuple(problems),
        session_affinity=spec.session_affinity,
        overrides=k8s_overrides,
    )
    # The proxy is the data-plane process when there is one; a server run directly is its own.
    target = PROXY_CONTAINER if any(c.name == PROXY_CONTAINER for c in containers) else SERVER_CONTAINER
    return mcptelemetryconfig.applied(workload, spec.telemetry_config_ref, world, target=target)
