"""Reconcile rules of MCPServer: what runs for one server, on either platform.

Every proxy reads one config file, `proxy.json` (`proxy_config()`, `reconcile/proxy.py`): its command
line is `mcpfleet proxy --config … --host 0.0.0.0 --port {port}`, plus `-- COMMAND` for a stdio package.

* stdio package (`uvx://`, `npx://`): the runner runs `mcpfleet proxy … -- uvx PKG …` and serves it
  over HTTP (`/mcp` or `/sse` per `proxyMode`); capped at 1 replica with a `ReplicasCapped` condition.
* http package (streamable-http / sse): the package runs directly and listens on `mcpPort`.
* OCI image, http transport (Kubernetes only): the image runs directly, the Service targets `mcpPort`.
* OCI image, stdio transport: on Kubernetes the image runs as its own container with stdin open;
  a runner container reaches it through the attach API (`attach: {namespace, podFromEnv: POD_NAME,
  container: mcp}` in its config), the pod name coming from the downward API; the Role allows `pods/attach` in the namespace. Locally,
  with a container runtime on the machine (`World.container_runtime`), the proxy's child is the
  image (`Container.local_image`), which the platform runs through that runtime under the server's
  permission profile; the `mcp` container's `command` in `podTemplateSpec` (the same override that
  Kubernetes merges into the pod) replaces the image's entrypoint there too. An image with an http
  transport runs the same way without the proxy, its `mcpPort` published on 127.0.0.1 (or behind the
  auth proxy, as on Kubernetes). Without a runtime, the local plan is a problem.

`authzConfig` (Cedar) and `audit` (`reconcile/policy.py`) are enforced by the proxy as well
(`authzConfig`, `auditConfig`); an http server then runs behind one, as with OIDC below. So are the
webhooks of a `webhookConfigRef` (`reconcile/mcpwebhookconfig.py`: `webhookConfig`, the Secret keys
as SecretFiles mounted into the proxy only), and the OAuth 2.1 authorization server of an
`externalAuthConfigRef` of type `embeddedAuthServer` (`reconcile/authserver.py`: `authserverConfig`).

Incoming OIDC (`oidcConfig` / `oidcConfigRef`, see `reconcile/oidc.py`) is enforced by the proxy
(`authConfig: auth.json`). An http server has no proxy of its own, so with OIDC one runs beside it
(`remote: http://127.0.0.1:MCPPORT`, `forwardAllPaths: true`) and the
Service targets it; that needs an `mcpPort` different from `proxyPort`, else a plan problem. Never
does a server configured with OIDC run without it.

The run config (file `runconfig.json`) records what runs plus the configHash of the referenced
MCPToolConfig / MCPExternalAuthConfig, so a change to either rolls the pods (it is part of the pod
template's checksum; on Kubernetes it is a key of the ConfigMap when a proxy runs). It never
holds secret values: those travel as secretKeyRef env. With a `toolConfigRef` it also holds that
MCPToolConfig's spec, and a stdio server's proxy config gets `runConfig: runconfig.json` and
enforces the filter and overrides itself. An http server has no relay that could: its
toolConfigRef is applied only by a vMCP gateway over its group (docs/operator.md, Known limits).
The same holds for `rateLimiting`: the stdio proxy enforces it (from the run config; Redis-shared
buckets with a redis `sessionStorage`, whose password comes as secretKeyRef env); an http server
with rateLimiting is a plan problem.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

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
    proxy,
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
from mcpfleet.reconcile.model import ConfigFile, Container, RbacRule, SecretEnv, WorkloadPlan, World
from mcpfleet.reconcile.oidc import AUTH_CONFIG, IncomingAuthPlan
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
        replace(
            c,
            permission_profile=profile,
            env=c.env + proxy_env,
            host_volumes=tuple(server.spec.volumes or ()),
        )
        if c.name == server_container
        else c
        for c in containers
    )
    return containers, serving, rbac


def _proxy_fields(server: MCPServer, world: World) -> dict[str, Any]:
    """The proxy's config (`reconcile/proxy.py`) but its mode: the Service's host names on Kubernetes
    (DNS-rebinding protection), the documents it enforces (incoming auth, authorization server, authz,
    audit, webhooks) and, for a stdio server, the run config's toolConfig / rateLimiting."""
    spec = server.spec
    fields: dict[str, Any] = {}
    if world.platform == "kubernetes":
        name = child_name("MCPServer", server.name)
        fields["allowedHosts"] = list(service_hosts(name, server.namespace, spec.proxy_port))
    fields.update(
        proxy.guard_fields(
            _auth(server, world), _authserver(server, world), _policy(server, world), _webhooks(server, world)
        )
    )
    if spec.transport == "stdio":
        fields["transport"] = spec.proxy_mode
        if spec.tool_config_ref or spec.rate_limiting:
            fields["runConfig"] = RUN_CONFIG
    return fields


def _server_container(server: MCPServer, *, beside_proxy: bool = False) -> Container:
    """An http server's own container (a package's command or an image), listening on its mcpPort."""
    spec = server.spec
    return Container(
        name=SERVER_CONTAINER,
        command=package_command(spec.image, spec.args) if spec.is_package else (),
        args=() if spec.is_package else tuple(spec.args or ()),
        image=None if spec.is_package else spec.image,
        port=spec.mcp_port if beside_proxy else spec.mcp_port or spec.proxy_port,
        fixed_port=True,
        env=plain_env(spec.env),
        secret_env=secret_env(spec.secrets),
        resources=resources_dict(spec.resources),
        secret_files=not beside_proxy,
    )


def _unconfined_containers(
    server: MCPServer, world: World
) -> tuple[tuple[Container, ...], str, tuple[RbacRule, ...]]:
    spec = server.spec
    if spec.transport != "stdio":
        if _fronted(server, world):
            return _behind_auth_proxy(server, world)
        return (_server_container(server),), SERVER_CONTAINER, ()
    env = plain_env(spec.env)
    secrets = secret_env(spec.secrets)
    resources = resources_dict(spec.resources)
    auth = _auth(server, world)
    # The proxy's secrets: incoming auth's client secret, sessionStorage's password for the
    # Redis-shared rate-limit buckets.
    proxy_secrets = auth.secret_env + (redis_password_env(spec.session_storage) if spec.rate_limiting else ())
    if spec.is_package:
        container = Container(
            name=PROXY_CONTAINER,
            command=proxy.command(package_command(spec.image, spec.args)),
            port=spec.proxy_port,
            env=env,
            secret_env=secrets + proxy_secrets,
            resources=resources,
            service_account_token=auth.service_account_token,
        )
        return (container,), PROXY_CONTAINER, ()
    if world.platform != "kubernetes":
        # Locally: the proxy's child is the image, run by the machine's container runtime.
        container = Container(
            name=PROXY_CONTAINER,
            command=proxy.command(()),
            port=spec.proxy_port,
            args=tuple(spec.args or ()),
            env=env,
            secret_env=secrets + proxy_secrets,
            resources=resources,
            local_image=spec.image,
            local_entrypoint=local_entrypoint(server),
            local_image_env=tuple(name for name, _ in env) + tuple(s.env_name for s in secrets),
        )
        return (container,), PROXY_CONTAINER, ()
    return _attached(server, proxy_secrets, auth.service_account_token)


def _attached(
    server: MCPServer, proxy_secrets: tuple[SecretEnv, ...], token: bool
) -> tuple[tuple[Container, ...], str, tuple[RbacRule, ...]]:
    """An OCI image speaking stdio on Kubernetes: its own container with stdin open, reached by the
    proxy through pods/attach (the pod's own name from the downward API: `attach.podFromEnv`)."""
    spec = server.spec
    server_container = Container(
        name=SERVER_CONTAINER,
        command=(),
        args=tuple(spec.args or ()),
        image=spec.image,
        env=plain_env(spec.env),
        secret_env=secret_env(spec.secrets),
        stdin=True,
        resources=resources_dict(spec.resources),
        secret_files=False,
    )
    runner = Container(
        name=PROXY_CONTAINER,
        command=proxy.command(),
        port=spec.proxy_port,
        field_env=(("POD_NAME", "metadata.name"),),
        secret_env=proxy_secrets,
        service_account_token=token,
    )
    rbac = (
        RbacRule(api_groups=("",), resources=("pods",), verbs=("get",)),
        RbacRule(api_groups=("",), resources=("pods/attach",), verbs=("create", "get")),
    )
    return (server_container, runner), PROXY_CONTAINER, rbac


def _behind_auth_proxy(
    server: MCPServer, world: World
) -> tuple[tuple[Container, ...], str, tuple[RbacRule, ...]]:
    """An http server with incoming OIDC, authzConfig or audit: it has none of its own, so `mcpfleet proxy`
    in remote mode runs beside it in the pod, checks every request and forwards it (every path: /mcp,
    or /sse and its /messages/) to the server on 127.0.0.1:mcpPort; the Service targets the proxy."""
    spec = server.spec
    assert spec.mcp_port is not None  # else a plan problem (see _problems)
    auth = _auth(server, world)
    relay = Container(
        name=PROXY_CONTAINER,
        command=proxy.command(),
        port=spec.proxy_port,
        secret_env=auth.secret_env,
        service_account_token=auth.service_account_token,
    )
    return (_server_container(server, beside_proxy=True), relay), PROXY_CONTAINER, ()


def proxy_config(server: MCPServer, world: World) -> dict[str, Any]:
    """The proxy's rendered config (`proxy.json`) for `server`: its mode and `_proxy_fields`."""
    spec = server.spec
    fields = _proxy_fields(server, world)
    if spec.transport != "stdio":
        fields.update(remote=f"http://127.0.0.1:{spec.mcp_port}", forwardAllPaths=True)
    elif not spec.is_package and world.platform == "kubernetes":
        fields["attach"] = {
            "namespace": server.namespace,
            "podFromEnv": "POD_NAME",
            "container": SERVER_CONTAINER,
        }
    return fields


def _replica_condition(server: MCPServer) -> tuple[str, ConditionStatus, str, str]:
    requested = 1 if server.spec.replicas is None else server.spec.replicas
    if requested > 1:
        message = f"stdio servers run at most 1 replica; {requested} requested, 1 runs"
        return (CONDITION_REPLICAS_CAPPED, "True", "StdioSingleReplica", message)
    return (CONDITION_REPLICAS_CAPPED, "False", "StdioSingleReplica", "stdio servers run at most 1 replica")


def _config_files(
    server: MCPServer, world: World, containers: tuple[Container, ...]
) -> tuple[ConfigFile, ...]:
    """The run config, the proxy's config (when a proxy runs) and the documents it names."""
    files = [ConfigFile(RUN_CONFIG, canonical_json(run_config(server, world)))]
    if any(c.name == PROXY_CONTAINER for c in containers):
        files.append(proxy.config_file(proxy_config(server, world)))
    auth = _auth(server, world)
    if auth.document is not None:
        files.append(ConfigFile(AUTH_CONFIG, canonical_json(auth.document)))
    files.extend(_policy(server, world).proxy_files())
    files.extend(_webhooks(server, world).proxy_files())
    files.extend(_authserver(server, world).proxy_files())
    return tuple(files)


def _runs(
    server: MCPServer, world: World, problems: list[str]
) -> tuple[tuple[Container, ...], str | None, tuple[RbacRule, ...]]:
    """The containers, serving container and RBAC: none when the server must not run (never without
    the auth / policies / webhooks / sandbox the spec asks for)."""
    if problems and (
        _auth(server, world).problems
        or _authserver(server, world).problems
        or _policy(server, world).problems
        or _webhooks(server, world).problems
        or _local_refused(server, world)
        or permissions.resolve(server, world).problems
    ):
        return (), None, ()
    if _no_port_for_auth_proxy(server, world):
        return (), None, ()
    return _containers(server, world)


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
        conditions.append(_replica_condition(server))
    local_image = world.platform == "local" and not spec.is_package and not _local_refused(server, world)
    conditions.append(permissions.resolve(server, world).condition(image=local_image))
    containers, serving, rbac = _runs(server, world, problems)
    config_files = _config_files(server, world, containers)
    containers = with_proxy_env(containers, PROXY_CONTAINER, spec.resource_overrides)
    containers, immediate = with_restart(containers, server.metadata.annotations)
    k8s_overrides = kubernetes_overrides(spec.pod_template_spec, spec.resource_overrides, immediate)
    image_command = any(c.local_entrypoint for c in containers)
    conditions += local_condition(
        world, k8s_overrides, "the `mcp` container's command: the image's entrypoint" if image_command else ""
    )
    conditions += ignored_primary_upstream(spec.authz_config, "spec.authzConfig")
    auth, policy = _auth(server, world), _policy(server, world)
    secret_files = _webhooks(server, world).secret_files + _authserver(server, world).secret_files
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
        config_files=config_files,
        config_map_files=auth.config_map_files + policy.config_map_files if serving is not None else (),
        secret_files=secret_files if serving is not None else (),
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
