"""Reconcile rules of VirtualMCPServer: the rendered vMCP config, what runs, and the status rule.

The vMCP config (`vmcp.yaml`) is rendered from the spec plus the group's membership: every member
MCPServer / MCPRemoteProxy with an observed URL becomes a backend; referenced MCPToolConfigs are
inlined; outgoing auth from MCPExternalAuthConfigs is resolved, secret values reaching the gateway
as secretKeyRef env named in the config (`headerValueEnv`, `tokenEnv`, `clientSecretEnv`). The dict
is the gateway's own model (`mcpfleet.vmcp.config.VMCPConfig`), built from the typed spec.

Status: Pending / Ready / Degraded / Failed. Backend health and capability counts come only from the
running gateway (it patches `discoveredBackends`, `toolCount`… itself); the operator lists the
backends it configured, keeps the gateway's health fields for a backend whose URL did not change,
and never estimates counts: they are cleared while no gateway replica is ready.

A serving gateway is Ready (or Degraded) only once it has reported every backend (none left
`unknown`), on both platforms: until then it is Pending with reason `BackendsNotReported`, because a
`tools/list` would still lack those backends' tools. Locally the reconcile loop reads the gateway's
report file; on Kubernetes the gateway patches its report into this status itself. A gateway that
never reports (its status PATCH refused, a pod that runs nothing) stays Pending, naming the backends
it has not reported: ready replicas alone do not make it Ready.
"""

from __future__ import annotations

import yaml

from mcpfleet.api.mcpexternalauthconfig import MCPExternalAuthConfig
from mcpfleet.api.mcpremoteproxy import MCPRemoteProxy
from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.mcptoolconfig import MCPToolConfigSpec
from mcpfleet.api.meta import ConditionStatus, LocalObjectReference, SecretKeyRef
from mcpfleet.api.virtualmcpserver import (
    BackendAuth,
    CompositeTool,
    DiscoveredBackend,
    Optimizer,
    VirtualMCPServer,
    VirtualMCPServerStatus,
    WorkloadToolConfig,
)
from mcpfleet.auth.oidc import IncomingAuthSettings
from mcpfleet.reconcile import (
    authserver,
    confighashes,
    mcpauthzconfig,
    mcpoidcconfig,
    mcpserverentry,
    mcptelemetryconfig,
    virtualmcpcompositetooldefinition,
)
from mcpfleet.reconcile.common import (
    child_name,
    child_name_problem,
    group_condition,
    labels,
    redis_password_env,
    serve_command,
    service_hosts,
    sha256_of,
    tracing_env,
)
from mcpfleet.reconcile.mcpserver import url_path as server_url_path
from mcpfleet.reconcile.model import (
    ConfigFile,
    ConfigMapFile,
    Container,
    RbacRule,
    SecretEnv,
    WorkloadObservation,
    WorkloadPlan,
    World,
)
from mcpfleet.reconcile.oidc import AUTOMOUNT_TOKEN_DIR, IncomingAuthPlan
from mcpfleet.reconcile.overrides import kubernetes_overrides, local_condition
from mcpfleet.reconcile.policy import (
    DEPRECATED_PRIMARY_UPSTREAM,
    ignored_primary_upstream,
    primary_upstream_of,
)
from mcpfleet.reconcile.status import ready_conditions
from mcpfleet.vmcp.config import (
    Backend,
    BackendAuthStrategy,
    BearerToken,
    HeaderInjection,
    OutgoingAuthSettings,
    TokenExchange,
    VMCPConfig,
)

CONFIG_FILE = "vmcp.yaml"
CONTAINER = "vmcp"
PORT = 4483


class RenderError(ValueError):
    """The spec cannot be rendered into a vMCP config; the message names the field."""


def group_members(vmcp: VirtualMCPServer, world: World) -> list[tuple[str, str, str]]:
    """(name, kind, transport) of the group's MCPServers and MCPRemoteProxies, sorted by name."""
    group = vmcp.spec.config.group_ref
    members: list[tuple[str, str, str]] = []
    for server in world.servers:
        if server.spec.group_ref == group:
            transport = "sse" if server_url_path(server) == "/sse" else "streamable-http"
            members.append((server.name, "MCPServer", transport))
    for proxy in world.remote_proxies:
        if proxy.spec.group_ref == group:
            members.append((proxy.name, "MCPRemoteProxy", "streamable-http"))
    return sorted(members)


def backends(vmcp: VirtualMCPServer, world: World) -> list[tuple[str, str | None]]:
    """(name, url) of every backend: group members (url None while not running) and static backends."""
    result: list[tuple[str, str | None]] = [
        (name, world.backend_urls.get(name)) for name, _, _ in group_members(vmcp, world)
    ]
    for static in vmcp.spec.config.backends:
        result.append((static.name, static.url))
    group = vmcp.spec.config.group_ref
    for entry in sorted(world.server_entries, key=lambda e: e.name):
        if entry.spec.group_ref.name == group and mcpserverentry.usable(entry, world):
            result.append((entry.name, entry.spec.remote_url))
    return result


class _Secrets:
    """Secret env vars the gateway needs, named deterministically so the config stays stable."""

    def __init__(self) -> None:
        self.env: list[SecretEnv] = []

    def add(self, ref: SecretKeyRef) -> str:
        for existing in self.env:
            if existing.secret.name == ref.name and existing.secret.key == ref.key:
                return existing.env_name
        var = f"MCPFLEET_SECRET_{len(self.env)}"
        self.env.append(SecretEnv(var, SecretKeyRef(name=ref.name, key=ref.key)))
        return var


def _auth_strategy(auth: MCPExternalAuthConfig, secrets: _Secrets, where: str) -> BackendAuthStrategy:
    """The gateway's strategy for `auth`, naming it (`authConfigRef` in the gateway's status)."""
    strategy = _strategy_of(auth, secrets, where)
    strategy.auth_config_ref = auth.name
    return strategy


def _strategy_of(auth: MCPExternalAuthConfig, secrets: _Secrets, where: str) -> BackendAuthStrategy:
    spec = auth.spec
    if spec.type == "unauthenticated":
        return BackendAuthStrategy(type="unauthenticated")
    if spec.type == "headerInjection" and spec.header_injection is not None:
        ref = spec.header_injection.value_secret_ref
        return BackendAuthStrategy(
            type="header_injection",
            header_injection=HeaderInjection(
                header_name=spec.header_injection.header_name, header_value_env=secrets.add(ref)
            ),
        )
    if spec.type == "bearerToken" and spec.bearer_token is not None:
        # `Authorization: Bearer <token>`; the token reaches the gateway only as secretKeyRef env.
        token_env = secrets.add(spec.bearer_token.token_secret_ref)
        return BackendAuthStrategy(type="bearer_token", bearer_token=BearerToken(token_env=token_env))
    if spec.type == "tokenExchange" and spec.token_exchange is not None:
        exchange = spec.token_exchange
        secret = exchange.client_secret_ref
        return BackendAuthStrategy(
            type="token_exchange",
            token_exchange=TokenExchange(
                token_url=exchange.token_url,
                audience=exchange.audience,
                client_id=exchange.client_id,
                scopes=list(exchange.scopes or ()),
                subject_token_type=exchange.subject_token_type,
                client_secret_env=secrets.add(secret) if secret is not None else None,
            ),
        )
    raise RenderError(
        f"{where}: MCPExternalAuthConfig {auth.name} of type {spec.type} is not supported by the gateway"
    )


def _backend_auth(
    auth: BackendAuth, world: World, secrets: _Secrets, where: str
) -> BackendAuthStrategy | None:
    if auth.type == "unauthenticated":
        return BackendAuthStrategy(type="unauthenticated")
    if auth.type == "external_auth_config_ref" and auth.external_auth_config_ref is not None:
        name = auth.external_auth_config_ref.name
        if name not in world.external_auth_configs:
            raise RenderError(f"{where}.externalAuthConfigRef: MCPExternalAuthConfig {name} not found")
        return _auth_strategy(world.external_auth_configs[name], secrets, where)
    return None  # discovered: resolved per backend below


def _outgoing(vmcp: VirtualMCPServer, world: World, secrets: _Secrets) -> OutgoingAuthSettings:
    outgoing = vmcp.spec.outgoing_auth
    default = BackendAuthStrategy(type="unauthenticated")
    per_backend: dict[str, BackendAuthStrategy] = {}
    explicit = dict((outgoing.backends or {}) if outgoing else {})
    if outgoing is not None and outgoing.default is not None:
        resolved = _backend_auth(outgoing.default, world, secrets, "spec.outgoingAuth.default")
        if resolved is not None:
            default = resolved
    discovered_default = (
        outgoing is None
        or outgoing.source == "discovered"
        or (outgoing.default is not None and outgoing.default.type == "discovered")
    )
    for name, _kind, _transport in group_members(vmcp, world):
        if name in explicit:
            resolved = _backend_auth(explicit[name], world, secrets, f"spec.outgoingAuth.backends.{name}")
            if resolved is not None:
                per_backend[name] = resolved
                continue
        elif not discovered_default:
            continue
        ref = _member_auth_ref(name, world)
        if ref is None:
            continue
        if ref not in world.external_auth_configs:
            raise RenderError(f"{name}.spec.externalAuthConfigRef: MCPExternalAuthConfig {ref} not found")
        per_backend[name] = _auth_strategy(
            world.external_auth_configs[ref], secrets, f"{name}.externalAuthConfigRef"
        )
    return OutgoingAuthSettings(source="inline", default=default, backends=per_backend)


def _member_auth_ref(name: str, world: World) -> str | None:
    members: tuple[MCPServer | MCPRemoteProxy, ...] = (*world.servers, *world.remote_proxies)
    for member in members:
        if member.name == name and member.spec.auth_server_ref is not None:
            # Its clients log in interactively at its embedded authorization server: the gateway
            # cannot obtain such a token for them (as with an embeddedAuthServer externalAuthConfigRef).
            raise RenderError(
                f"{name}.spec.authServerRef: the backend runs an embedded authorization server whose tokens"
                " the gateway cannot obtain; name it in spec.outgoingAuth.backends or take it out of the group"
            )
    for server in world.servers:
        if server.name == name and server.spec.external_auth_config_ref is not None:
            return server.spec.external_auth_config_ref.name
    for proxy in world.remote_proxies:
        if proxy.name == name and proxy.spec.external_auth_config_ref is not None:
            ref = proxy.spec.external_auth_config_ref.name
            # A remote proxy applies headers / bearer tokens toward the remote itself: the gateway
            # must not send that secret to the proxy. Only token exchange needs the client's token;
            # an embedded authorization server needs a user's login the gateway cannot make (refused).
            auth = world.external_auth_configs.get(ref)
            needs_gateway = auth is None or auth.spec.type in {"tokenExchange", "embeddedAuthServer"}
            return ref if needs_gateway else None
    return None


def _incoming_plan(vmcp: VirtualMCPServer, world: World) -> IncomingAuthPlan:
    incoming = vmcp.spec.incoming_auth
    if incoming.type == "anonymous":
        return IncomingAuthPlan()
    # The gateway's pod always has its own token mounted (it watches its group through the API).
    return mcpoidcconfig.workload_auth(
        incoming.oidc_config,
        incoming.oidc_config_ref,
        world,
        where="spec.incomingAuth",
        token_dir=AUTOMOUNT_TOKEN_DIR,
    )


def _optimizer(vmcp: VirtualMCPServer, world: World) -> Optimizer | None:
    """`config.optimizer`, its embedding service the URL of the EmbeddingServer `embeddingServerRef` names.

    The reference turns the optimizer on (TEI protocol). Until that server is Ready the gateway is not
    rendered: a RenderError naming the field (the operator re-reconciles when its URL appears).
    """
    optimizer = vmcp.spec.config.optimizer
    ref = vmcp.spec.embedding_server_ref
    if ref is None:
        return optimizer
    if ref.name not in world.embedding_urls:
        raise RenderError(f"spec.embeddingServerRef: EmbeddingServer {ref.name} not found")
    url = world.embedding_urls[ref.name]
    if url is None:
        raise RenderError(f"spec.embeddingServerRef: EmbeddingServer {ref.name} is not Ready yet")
    return (optimizer or Optimizer()).model_copy(
        update={"embedding_service": url, "embedding_provider": "tei"}
    )


def _authz_files(vmcp: VirtualMCPServer, world: World) -> tuple[ConfigMapFile, ...]:
    """The ConfigMap key an `incomingAuth.authzConfig.configMap` mounts (followed live by the gateway)."""
    incoming = vmcp.spec.incoming_auth
    return mcpauthzconfig.document(incoming.authz_config, incoming.authz_config_ref, world)[1]


def _incoming(vmcp: VirtualMCPServer, world: World, secrets: _Secrets) -> IncomingAuthSettings:
    """The `incomingAuth` block of the vMCP config (see `reconcile/oidc.py` for each OIDC form)."""
    auth = _incoming_plan(vmcp, world)
    if auth.problems:
        raise RenderError("; ".join(auth.problems))
    if auth.document is None:
        return IncomingAuthSettings(type="anonymous")
    incoming = IncomingAuthSettings.model_validate(auth.document)
    if auth.secret_env and incoming.oidc is not None:
        # The client secret reaches the gateway as secretKeyRef env, like the outgoing secrets.
        incoming.oidc.client_secret_env = secrets.add(auth.secret_env[-1].secret)
    return incoming


def _backends(vmcp: VirtualMCPServer, world: World) -> list[Backend]:
    """Group members with an observed URL, then the manifest's static backends."""
    members = [
        Backend(name=name, url=url, transport=transport, metadata={"kind": kind})
        for name, kind, transport in group_members(vmcp, world)
        if (url := world.backend_urls.get(name)) is not None
    ]
    group = vmcp.spec.config.group_ref
    own = {"kind": "static", **({"group": group} if group else {})}  # RESERVED_BACKEND_METADATA
    static = [
        Backend(
            name=b.name,
            url=b.url,
            transport=b.transport,
            type=b.type,
            ca_bundle_path=b.ca_bundle_path,
            metadata={**b.metadata, **own},
        )
        for b in vmcp.spec.config.backends
    ]
    return members + static


def _member_tool_configs(vmcp: VirtualMCPServer, world: World) -> list[WorkloadToolConfig]:
    """The group members' own toolConfigRefs that the gateway applies.

    A member's toolConfigRef applies in the gateway unless the aggregation lists that backend, or the
    member's proxy already enforces it (stdio servers: `--run-config`); applying it twice would hide
    renamed tools, whose new names the filter does not list.
    """
    group = vmcp.spec.config.group_ref
    listed = {t.workload for t in vmcp.spec.config.aggregation.tools}
    refs = [
        (s.name, s.spec.tool_config_ref)
        for s in world.servers
        if s.spec.group_ref == group and s.spec.transport != "stdio"
    ]
    refs += [(p.name, p.spec.tool_config_ref) for p in world.remote_proxies if p.spec.group_ref == group]
    return [
        WorkloadToolConfig(workload=name, tool_config_ref=LocalObjectReference(name=ref.name))
        for name, ref in refs
        if ref is not None and name not in listed
    ]


def _composite_tools(vmcp: VirtualMCPServer, world: World) -> list[CompositeTool]:
    try:
        return virtualmcpcompositetooldefinition.resolve(vmcp, world)
    except virtualmcpcompositetooldefinition.CompositeRefError as exc:
        raise RenderError(str(exc)) from exc


def render_config(vmcp: VirtualMCPServer, world: World) -> tuple[VMCPConfig, tuple[SecretEnv, ...]]:
    """The vMCP config (the gateway's own model) and the secret env it names."""
    config = vmcp.spec.config
    secrets = _Secrets()
    tools = [*config.aggregation.tools, *_member_tool_configs(vmcp, world)]
    tool_configs: dict[str, MCPToolConfigSpec] = {}
    for index, tool in enumerate(tools):
        if tool.tool_config_ref is None:
            continue
        ref = tool.tool_config_ref.name
        if ref not in world.tool_configs:
            raise RenderError(
                f"spec.config.aggregation.tools[{index}].toolConfigRef: MCPToolConfig {ref} not found"
            )
        tool_configs[ref] = world.tool_configs[ref].spec
    incoming, outgoing = _incoming(vmcp, world, secrets), _outgoing(vmcp, world, secrets)
    entries = mcpserverentry.gateway_backends(config.group_ref, world, secrets.add)
    composite_tools = _composite_tools(vmcp, world)
    for name, ref in entries.auth_refs.items():
        if name not in outgoing.backends:  # an explicit outgoingAuth.backends entry wins
            outgoing.backends[name] = _auth_strategy(
                world.external_auth_configs[ref],
                secrets,
                f"MCPServerEntry {name}: spec.externalAuthConfigRef",
            )
    spec_auth = vmcp.spec.incoming_auth
    authz, _files, authz_problems = mcpauthzconfig.document(
        spec_auth.authz_config, spec_auth.authz_config_ref, world, where="spec.incomingAuth"
    )
    if authz_problems:
        raise RenderError("; ".join(authz_problems))
    optimizer = _optimizer(vmcp, world)
    try:
        rendered = VMCPConfig(
            name=vmcp.name,
            group_ref=config.group_ref,
            namespace=vmcp.namespace if world.platform == "kubernetes" else None,
            backends=[*_backends(vmcp, world), *(Backend.model_validate(b) for b in entries.backends)],
            aggregation=config.aggregation.model_copy(
                update={"tools": sorted(tools, key=lambda t: t.workload)}
            ),
            composite_tools=composite_tools,
            operational=config.operational,
            optimizer=optimizer,
            code_mode=config.code_mode,
            tool_configs=tool_configs,
            incoming_auth=incoming,
            outgoing_auth=outgoing,
            authz=authz,
            audit=config.audit,
            rate_limiting=config.rate_limiting,
            session_storage=vmcp.spec.session_storage,
            # The top-level list takes precedence over the config's (ToolHive's rule).
            passthrough_headers=vmcp.spec.passthrough_headers
            if vmcp.spec.passthrough_headers is not None
            else config.passthrough_headers,
        )
    except ValueError as exc:
        raise RenderError(f"rendered vMCP config is invalid: {exc}") from exc
    return rendered, (*secrets.env, *redis_password_env(vmcp.spec.session_storage))


def _config_map_files(vmcp: VirtualMCPServer, world: World) -> tuple[ConfigMapFile, ...]:
    """The user's ConfigMap keys the gateway reads: shared OIDC settings, entries' CA bundles."""
    entries = mcpserverentry.gateway_backends(vmcp.spec.config.group_ref, world, _Secrets().add)
    return (*_incoming_plan(vmcp, world).config_map_files, *entries.config_map_files)


LEGACY_PRIMARY = "spec.incomingAuth.authzConfig.inline.primaryUpstreamProvider"


def _primary_upstream_conditions(vmcp: VirtualMCPServer) -> tuple[tuple[str, ConditionStatus, str, str], ...]:
    """ToolHive's advisories for the deprecated `incomingAuth.authzConfig.inline.primaryUpstreamProvider`:
    read as `authServerConfig.primaryUpstreamProvider` (Deprecated), or of no effect without an
    embedded authorization server (Ignored)."""
    authz = vmcp.spec.incoming_auth.authz_config
    if vmcp.spec.auth_server_config is None:
        return ignored_primary_upstream(authz, "spec.incomingAuth.authzConfig")
    if primary_upstream_of(authz) is None:
        return ()
    message = f"{LEGACY_PRIMARY} is deprecated: it is read as spec.authServerConfig.primaryUpstreamProvider; set that"
    return ((DEPRECATED_PRIMARY_UPSTREAM, "True", "DeprecatedField", message),)


def _authserver(vmcp: VirtualMCPServer, world: World) -> authserver.AuthServerPlan:
    """`spec.authServerConfig`: the gateway runs the embedded authorization server and is the issuer of
    the tokens its incomingAuth accepts (an inline issuer is compared here; one from a ConfigMap or an
    MCPOIDCConfig by the gateway at start, which refuses to serve on a mismatch)."""
    spec = vmcp.spec.auth_server_config
    if spec is None:
        return authserver.AuthServerPlan()
    where = "spec.authServerConfig"
    problems: list[str] = []
    legacy = primary_upstream_of(vmcp.spec.incoming_auth.authz_config)
    if legacy is not None:
        # ToolHive's deprecated place of primaryUpstreamProvider: read as the current field.
        if spec.primary_upstream_provider not in (None, legacy):
            problems.append(
                f"{LEGACY_PRIMARY}: {legacy} conflicts with {where}.primaryUpstreamProvider"
                f" {spec.primary_upstream_provider}; set only {where}.primaryUpstreamProvider"
            )
        elif all(p.name != legacy for p in spec.upstream_providers):
            problems.append(f"{LEGACY_PRIMARY}: {legacy} names none of {where}.upstreamProviders")
        else:
            spec = spec.model_copy(update={"primary_upstream_provider": legacy})
    document = _incoming_plan(vmcp, world).document or {}
    issuer = (document.get("oidc") or {}).get("issuer")
    if document.get("type") != "oidc":
        problems.append(f"{where}: needs incomingAuth type oidc with issuer {spec.issuer}")
    elif issuer is not None and str(issuer).rstrip("/") != spec.issuer.rstrip("/"):
        problems.append(f"{where}.issuer: {spec.issuer} must equal incomingAuth's OIDC issuer {issuer}")
    return authserver.settings_plan(
        spec, world, where=where, config_hash=sha256_of(spec.dump()), problems=problems
    )


def _gateway_rbac(name: str) -> tuple[RbacRule, ...]:
    """What the gateway reads through the API (its group's members and configs) and its own status."""
    return (
        RbacRule(
            api_groups=("mcpfleet.dev",),
            resources=(
                "mcpgroups",
                "mcpservers",
                "mcpremoteproxies",
                "mcptoolconfigs",
                "mcpexternalauthconfigs",
            ),
            verbs=("get", "list", "watch"),
        ),
        RbacRule(
            api_groups=("mcpfleet.dev",),
            resources=("virtualmcpservers",),
            verbs=("get",),
            resource_names=(name,),
        ),
        RbacRule(
            api_groups=("mcpfleet.dev",),
            resources=("virtualmcpservers/status",),
            verbs=("get", "patch", "update"),
            resource_names=(name,),
        ),
    )


def plan(vmcp: VirtualMCPServer, world: World) -> WorkloadPlan:
    """What should run for `vmcp`: the gateway with its rendered config."""
    spec = vmcp.spec
    group = spec.config.group_ref
    problems: list[str] = []
    if world.platform == "kubernetes":
        problems.extend(child_name_problem("VirtualMCPServer", vmcp.name))
    config_files: tuple[ConfigFile, ...] = ()
    secret_env: tuple[SecretEnv, ...] = ()
    if group not in world.groups:
        problems.append(f"spec.config.groupRef: MCPGroup {group} not found")
    else:
        try:
            rendered, secret_env = render_config(vmcp, world)
            config_files = (ConfigFile(CONFIG_FILE, yaml.safe_dump(rendered.dump(), sort_keys=True)),)
        except RenderError as exc:
            problems.append(str(exc))
    embedded = _authserver(vmcp, world)
    problems.extend(embedded.problems)
    if config_files:
        config_files += embedded.proxy_files()
    command: list[str] = serve_command("vmcp", CONFIG_FILE) + list(embedded.proxy_args())
    rbac: tuple[RbacRule, ...] = ()
    if world.platform == "kubernetes":
        command += ["--host", "0.0.0.0", "--status-resource", vmcp.name]
        for host in service_hosts(child_name("VirtualMCPServer", vmcp.name), vmcp.namespace, PORT):
            command += ["--allowed-host", host]
        rbac = _gateway_rbac(vmcp.name)
    overrides = kubernetes_overrides(
        spec.pod_template_spec, None, image_pull_secrets=tuple(s.name for s in spec.image_pull_secrets or ())
    )
    container = Container(
        name=CONTAINER,
        command=tuple(command),
        port=PORT,
        env=tracing_env(world, "VirtualMCPServer", vmcp.name),
        secret_env=secret_env,
        secret_files=bool(embedded.secret_files),
    )
    workload = WorkloadPlan(
        kind="VirtualMCPServer",
        name=vmcp.name,
        namespace=vmcp.namespace,
        replicas=1 if spec.replicas is None else spec.replicas,
        containers=(container,),
        serving_container=CONTAINER,
        url_path="/mcp",
        health_path="/health",
        config_files=config_files,
        secret_files=embedded.secret_files,
        config_map_files=_config_map_files(vmcp, world) + _authz_files(vmcp, world) if config_files else (),
        rbac=rbac,
        service_account=spec.service_account,
        labels=labels("VirtualMCPServer", vmcp.name, "vmcp"),
        conditions=(
            *group_condition(group, world),
            *local_condition(world, overrides),
            *_primary_upstream_conditions(vmcp),
        ),
        problems=tuple(problems),
        service_type=spec.service_type,
        session_affinity=spec.session_affinity,
        overrides=overrides,
    )
    # ToolHive's deprecated inline block, when no MCPTelemetryConfig is named (the model refuses both).
    workload = mcptelemetryconfig.applied_inline(workload, spec.config.telemetry, world, target=CONTAINER)
    return mcptelemetryconfig.applied(workload, spec.telemetry_config_ref, world, target=CONTAINER)


def _discovered(
    previous: list[DiscoveredBackend], wanted: list[tuple[str, str | None]]
) -> list[DiscoveredBackend]:
    """The configured backends; the gateway's health fields kept for a backend whose URL is unchanged."""
    reported = {b.name: b for b in previous}
    result: list[DiscoveredBackend] = []
    for name, url in wanted:
        old = reported.get(name)
        if old is not None and old.url == url:
            result.append(old)
        elif url is None:
            result.append(
                DiscoveredBackend(name=name, status="unavailable", message="the backend is not running")
            )
        else:
            result.append(DiscoveredBackend(name=name, url=url, status="unknown"))
    return result


def status(
    previous: VirtualMCPServerStatus,
    vmcp: VirtualMCPServer,
    plan: WorkloadPlan,
    observation: WorkloadObservation | None,
    world: World,
    now: str | None = None,
) -> VirtualMCPServerStatus:
    """Pending / Ready / Degraded / Failed; equal to `previous` when nothing changed (so no write)."""
    generation = vmcp.generation
    ready_replicas = observation.ready_replicas if observation else 0
    url: str | None = None
    wanted = backends(vmcp, world) if not plan.problems else []
    discovered = _discovered(previous.discovered_backends, wanted)
    serving = (
        observation is not None
        and not observation.failed
        and plan.replicas > 0
        and ready_replicas >= plan.replicas
        and observation.url is not None
    )
    if plan.problems:
        phase, reason, message = "Failed", "InvalidSpec", "; ".join(plan.problems)
    elif observation is not None and observation.failed:
        phase, reason = "Failed", "WorkloadFailed"
        message = observation.failure_message or "the gateway failed"
    elif observation is not None and observation.terminating:
        phase, reason, message = "Pending", "Terminating", "the gateway is being deleted"
    elif plan.replicas == 0:
        phase, reason, message = "Pending", "ScaledToZero", "replicas is 0"
    elif not serving:
        phase, reason = "Pending", "NotReady"
        message = f"{ready_replicas}/{plan.replicas} replicas ready"
    else:
        unhealthy = [b.name for b in discovered if b.status == "unhealthy" or (b.status == "unavailable")]
        unreported = [b.name for b in discovered if b.status == "unknown"]
        if unreported:
            # Serving, but not connected to every backend yet: its `tools/list` would lack theirs.
            phase, reason = "Pending", "BackendsNotReported"
            message = f"waiting for the gateway to report backends: {', '.join(unreported)}"
        elif unhealthy:
            phase, reason = "Degraded", "BackendsUnhealthy"
            message = f"unhealthy backends: {', '.join(unhealthy)}"
        else:
            phase, reason = "Ready", "Ready"
            message = f"{ready_replicas}/{plan.replicas} replicas ready, {len(discovered)} backends"
        url = observation.url if observation else None
    ready = phase in ("Ready", "Degraded")
    conditions = ready_conditions(previous.conditions, ready, reason, message, plan, generation, now)
    # Capability counts are the running gateway's report: kept while it serves, cleared otherwise.
    return VirtualMCPServerStatus(
        phase=phase,
        message=message,
        url=url,
        ready_replicas=ready_replicas,
        observed_generation=generation,
        conditions=conditions,
        discovered_backends=discovered,
        backend_count=len(discovered),
        tool_count=previous.tool_count if serving else None,
        resource_count=previous.resource_count if serving else None,
        prompt_count=previous.prompt_count if serving else None,
        **confighashes.gateway_hashes(vmcp.spec, world),
    )
