"""VirtualMCPServer: one MCP endpoint (the vMCP gateway) aggregating the servers of an MCPGroup.

`spec.config` is the gateway's configuration as users write it, and its models are also what the
gateway reads: its config file (`mcpfleet.vmcp.config.VMCPConfig`) is `GatewayConfig` plus the few
fields a renderer resolves (discovered backends, inlined MCPToolConfigs, resolved auth). Those
models live in `mcpfleet.api.gatewayconfig` (re-exported here), so the gateway and the CRD agree on
them and a gateway's start builds only them.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StringConstraints

from mcpfleet.api.common import OIDCConfig, OIDCConfigRef, PodTemplatePatch, TelemetryConfigRef
from mcpfleet.api.gatewayconfig import (
    FREE_FORM,
    LIVE_CONFIG_FIELDS,
    RESTRICTED_PASSTHROUGH,
    Aggregation,
    CircuitBreaker,
    CodeMode,
    CompositeAnnotations,
    CompositeTool,
    ConflictResolutionConfig,
    ElicitationResponse,
    FailureHandling,
    GatewayConfig,
    Operational,
    Optimizer,
    PassthroughHeaderName,
    PassthroughHeaders,
    StaticBackend,
    StepOnError,
    Timeouts,
    WorkflowStep,
    WorkloadToolConfig,
)
from mcpfleet.api.inlinetelemetry import InlineTelemetry
from mcpfleet.api.mcpexternalauthconfig import EmbeddedAuthServerConfig
from mcpfleet.api.meta import (
    WORKLOAD_COLUMNS,
    ApiModel,
    Condition,
    KindInfo,
    LocalObjectReference,
    PrinterColumn,
    RefersTo,
    Rule,
    RuleModel,
)
from mcpfleet.api.policy import AUTHZ_REF_EXCLUSIVE, AuthzConfig
from mcpfleet.api.ratelimit import (
    NEEDS_REDIS_MESSAGE,
    SessionStorage,
    needs_redis,
    needs_redis_rule,
)
from mcpfleet.api.resource import Resource
from mcpfleet.api.superseded import Deprecated, Superseded
from mcpfleet.api.versions import Change, Move, NameRef

SUPERSEDED_GROUP_REF = Superseded(
    old="spec.config.groupRef",
    current="spec.groupRef.name",
    node={
        "type": "string",
        "minLength": 1,
        "description": "Superseded by spec.groupRef (ToolHive's operator fills it from there): read as"
        " spec.groupRef.name, which may then be left out; a different value is refused.",
    },
    anchor="spec",
    cel="!has(self.config) || !has(self.config.groupRef) || !has(self.groupRef)"
    " || self.config.groupRef == self.groupRef.name",
    optional="groupRef",
    present="has(self.groupRef) || (has(self.config) && has(self.config.groupRef))",
)
_OLD_STORAGE = "self.config.sessionStorage"
SUPERSEDED_SESSION_STORAGE = Superseded(
    old="spec.config.sessionStorage",
    current="spec.sessionStorage",
    node={
        "type": "object",
        "description": "Superseded by spec.sessionStorage (ToolHive's operator fills it from there): read as"
        " spec.sessionStorage when that is unset (no password then); a different provider, address, db or"
        " keyPrefix is refused.",
        "properties": {
            "provider": {"type": "string", "enum": ["memory", "redis"]},
            "address": {"type": "string", "minLength": 1, "maxLength": 512},
            "db": {"type": "integer", "minimum": 0, "maximum": 2147483647},
            "keyPrefix": {"type": "string", "maxLength": 128},
        },
        "required": ["provider"],
        "x-kubernetes-validations": [
            {"rule": "self.provider == 'redis' ? has(self.address) : true", "message": "address is required"}
        ],
    },
    anchor="spec",
    cel=f"!has(self.config) || !has({_OLD_STORAGE}) || !has(self.sessionStorage) || ("
    f"{_OLD_STORAGE}.provider == self.sessionStorage.provider"
    f" && (!has({_OLD_STORAGE}.address) || (has(self.sessionStorage.address)"
    f" && {_OLD_STORAGE}.address == self.sessionStorage.address))"
    f" && (has({_OLD_STORAGE}.db) ? {_OLD_STORAGE}.db : 0)"
    " == (has(self.sessionStorage.db) ? self.sessionStorage.db : 0)"
    f" && (!has({_OLD_STORAGE}.keyPrefix) || (has(self.sessionStorage.keyPrefix)"
    f" && {_OLD_STORAGE}.keyPrefix == self.sessionStorage.keyPrefix)))",
    compared=("provider", "address", "db", "keyPrefix"),
    defaults=(("db", 0),),
)
SUPERSEDED_NAME = Superseded(
    old="spec.config.name",
    current="metadata.name",
    node={
        "type": "string",
        "minLength": 1,
        "maxLength": 253,
        "description": "Superseded by metadata.name (the gateway's name): a different value is refused.",
    },
    anchor="",
    cel="!has(self.spec.config) || !has(self.spec.config.name) || self.spec.config.name == self.metadata.name",
)


MetadataValue = Annotated[str, StringConstraints(max_length=1024)]


class VirtualMCPConfig(GatewayConfig):
    """The gateway configuration written in the manifest."""

    group_ref: Annotated[str, RefersTo("MCPGroup")] = Field(min_length=1)
    """MCPGroup whose servers and remote proxies are the backends."""
    backends: list[StaticBackend] = Field(default_factory=list, max_length=100)
    """Extra backends given by URL."""
    composite_tool_refs: Annotated[
        list[LocalObjectReference], RefersTo("VirtualMCPCompositeToolDefinition")
    ] = Field(default_factory=list, max_length=50)
    """VirtualMCPCompositeToolDefinitions whose tools this gateway serves beside `compositeTools`."""
    telemetry: InlineTelemetry | None = None
    """Deprecated (ToolHive's inline block): OpenTelemetry settings of the gateway when
    spec.telemetryConfigRef is unset; refused together with it. Prefer an MCPTelemetryConfig."""
    metadata: dict[str, MetadataValue] | None = Field(default=None, max_length=50)
    """Free key/value notes about this configuration (ToolHive's `config.metadata`): kept with the
    object, no effect on the gateway."""


class IncomingAuth(RuleModel):
    """How clients authenticate to the gateway."""

    rules = (
        Rule(
            cel="self.type != 'oidc' || (has(self.oidcConfig) != has(self.oidcConfigRef))",
            message="type oidc needs exactly one of oidcConfig (inline settings) and oidcConfigRef",
            field_path=".oidcConfig",
            check=lambda s: s.type != "oidc" or ((s.oidc_config is None) != (s.oidc_config_ref is None)),
        ),
        Rule(
            cel="self.type == 'oidc' || (!has(self.oidcConfig) && !has(self.oidcConfigRef))",
            message="oidcConfig and oidcConfigRef are only allowed with type oidc",
            field_path=".type",
            check=lambda s: s.type == "oidc" or (s.oidc_config is None and s.oidc_config_ref is None),
        ),
        AUTHZ_REF_EXCLUSIVE,
    )

    type: Literal["anonymous", "oidc"]
    """anonymous or oidc."""
    oidc_config: OIDCConfig | None = None
    """Inline OIDC settings."""
    oidc_config_ref: Annotated[OIDCConfigRef | None, RefersTo("MCPOIDCConfig")] = None
    """Reference to shared OIDC settings."""
    authz_config: AuthzConfig | None = None
    """Cedar authorization of the gateway's tools, prompts and resources (ToolHive's shape)."""
    authz_config_ref: Annotated[LocalObjectReference | None, RefersTo("MCPAuthzConfig")] = None
    """MCPAuthzConfig with this workload's authorization policies (instead of authzConfig)."""


class BackendAuth(RuleModel):
    """Outgoing authentication toward one backend."""

    rules = (
        Rule(
            cel="self.type != 'external_auth_config_ref' || has(self.externalAuthConfigRef)",
            message="type external_auth_config_ref needs externalAuthConfigRef",
            field_path=".externalAuthConfigRef",
            check=lambda s: s.type != "external_auth_config_ref" or s.external_auth_config_ref is not None,
        ),
    )

    type: Literal["discovered", "external_auth_config_ref", "unauthenticated"]
    """discovered (the backend's own externalAuthConfigRef), external_auth_config_ref, or unauthenticated."""
    external_auth_config_ref: Annotated[LocalObjectReference | None, RefersTo("MCPExternalAuthConfig")] = None
    """MCPExternalAuthConfig to use."""


class OutgoingAuth(ApiModel):
    """How the gateway authenticates to its backends."""

    source: Literal["discovered", "inline"] = "discovered"
    """discovered: from each backend's externalAuthConfigRef; inline: from default / backends here."""
    default: BackendAuth | None = None
    """Authentication for backends not listed in `backends`."""
    backends: dict[str, BackendAuth] | None = Field(default=None, max_length=100)
    """Per-backend authentication, keyed by backend name."""


class VirtualMCPServerSpec(RuleModel):
    """Desired state of a gateway."""

    rules = (
        Rule(
            # `config` is optional in v1beta1 (groupRef moved out of it): guarded like ToolHive's rule.
            cel="!has(self.config) || "
            + needs_redis_rule("self.config.rateLimiting", "self.sessionStorage", "self.replicas"),
            message=NEEDS_REDIS_MESSAGE,
            field_path=".sessionStorage",
            check=lambda s: needs_redis(s.config.rate_limiting, s.session_storage, s.replicas),
        ),
        Rule(
            cel="!has(self.config) || !has(self.config.rateLimiting) || ((!has(self.config.rateLimiting.perUser)"
            " && (!has(self.config.rateLimiting.tools) || self.config.rateLimiting.tools.all(t, !has(t.perUser))))"
            " || self.incomingAuth.type == 'oidc')",
            message="perUser rate limiting requires incomingAuth type oidc",
            field_path=".config.rateLimiting",
            check=lambda s: (
                s.config.rate_limiting is None
                or not s.config.rate_limiting.needs_user
                or s.incoming_auth.type == "oidc"
            ),
        ),
        Rule(
            cel="!(has(self.telemetryConfigRef) && has(self.config) && has(self.config.telemetry))",
            message="set one of telemetryConfigRef and config.telemetry (deprecated: prefer telemetryConfigRef)",
            field_path=".config.telemetry",
            check=lambda s: not (s.telemetry_config_ref is not None and s.config.telemetry is not None),
        ),
        Rule(
            cel="!(has(self.embeddingServerRef) && has(self.config) && has(self.config.optimizer)"
            " && has(self.config.optimizer.embeddingService))",
            message="set one of embeddingServerRef and config.optimizer.embeddingService",
            field_path=".embeddingServerRef",
            check=lambda s: (
                not (
                    s.embedding_server_ref is not None
                    and s.config.optimizer is not None
                    and s.config.optimizer.embedding_service is not None
                )
            ),
        ),
        Rule(
            cel="!(has(self.embeddingServerRef) && has(self.config) && has(self.config.optimizer)"
            " && self.config.optimizer.embeddingProvider == 'openai')",
            message="embeddingServerRef is a TEI server and cannot be combined with optimizer.embeddingProvider"
            " 'openai'; openai mode uses embeddingService directly",
            field_path=".embeddingServerRef",
            check=lambda s: (
                not (
                    s.embedding_server_ref is not None
                    and s.config.optimizer is not None
                    and s.config.optimizer.embedding_provider == "openai"
                )
            ),
        ),
    )

    config: VirtualMCPConfig
    """Gateway configuration: group, aggregation, composite tools, operational settings."""
    incoming_auth: IncomingAuth
    """How clients authenticate."""
    outgoing_auth: OutgoingAuth | None = None
    """How the gateway authenticates to backends."""
    replicas: int | None = Field(default=None, ge=0)
    """Replicas of the gateway. More than one needs sessionStorage redis for 2025-era sessions to
    continue on any replica (2026-07-28 clients are sessionless)."""
    session_storage: SessionStorage | None = None
    """Where client sessions and shared rate-limit buckets live: redis for several replicas."""
    service_account: str | None = None
    """Existing ServiceAccount to run as; one is created when unset."""
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    """Type of the gateway's Service."""
    session_affinity: Literal["ClientIP", "None"] = "ClientIP"
    """Session affinity of the gateway's Service (ToolHive's default ClientIP: MCP sessions are
    stateful; None for sessionless clients or an external load balancer with its own affinity)."""
    image_pull_secrets: list[LocalObjectReference] | None = Field(default=None, max_length=20)
    """Pull secrets of the gateway pod (Kubernetes only); a podTemplateSpec's are merged onto them."""
    pod_template_spec: PodTemplatePatch
    """A PodTemplateSpec merged onto the gateway's pod (strategic merge; Kubernetes only)."""
    telemetry_config_ref: Annotated[TelemetryConfigRef | None, RefersTo("MCPTelemetryConfig")] = None
    """MCPTelemetryConfig with the gateway's OpenTelemetry / Prometheus settings."""
    embedding_server_ref: Annotated[LocalObjectReference | None, RefersTo("EmbeddingServer")] = None
    """EmbeddingServer whose URL is the optimizer's embedding service (TEI); turns the optimizer on."""
    passthrough_headers: PassthroughHeaders
    """Client request headers forwarded verbatim to every backend (see `config.passthroughHeaders`);
    takes precedence over `config.passthroughHeaders`."""
    auth_server_config: EmbeddedAuthServerConfig | None = None
    """An OAuth 2.1 authorization server the gateway runs (ToolHive's `authServerConfig`): it is the
    issuer of the tokens clients bring (incomingAuth must be oidc with the same issuer), logs users in
    through the upstream provider and serves its endpoints beside `/mcp` (docs/authserver.md). One
    upstream provider (see upstreamProviders); backends get what outgoingAuth says."""


class DiscoveredBackend(ApiModel):
    """A backend as the running gateway sees it."""

    name: str
    """Backend name."""
    url: str | None = None
    """Backend URL."""
    status: str | None = None
    """healthy, unhealthy or unknown."""
    last_health_check: str | None = None
    """Time of the last health check (RFC 3339)."""
    message: str | None = None
    """Last error, if any."""
    circuit_breaker_state: Literal["closed", "open", "half-open"] | None = None
    """State of the backend's circuit breaker."""
    consecutive_failures: int | None = None
    """Failed health checks in a row."""
    circuit_last_changed: str | None = None
    """When the circuit breaker last changed state (RFC 3339; unset while it never did or is off)."""
    mcp_revision: str | None = None
    """The MCP revision the gateway speaks with the backend: 2026-07-28 when it has the 2026 era, else
    the version its initialize negotiated (e.g. 2025-11-25); unset before it connected."""
    auth_type: str | None = None
    """How the gateway authenticates to it: unauthenticated, header_injection, bearer_token or
    token_exchange."""
    auth_config_ref: str | None = None
    """The MCPExternalAuthConfig that strategy comes from, if any."""


class VirtualMCPServerStatus(ApiModel):
    """Flat workload status plus what the running gateway reports."""

    phase: Literal["Pending", "Ready", "Degraded", "Failed"] | None = None
    """Pending, Ready, Degraded (some backends unhealthy) or Failed."""
    message: str | None = None
    """Why the gateway is in this phase."""
    url: str | None = None
    """In-cluster URL of the MCP endpoint; set only while serving."""
    ready_replicas: int | None = Field(default=None, ge=0)
    """Ready replicas of the gateway."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation this status describes."""
    conditions: list[Condition] = Field(default_factory=list)
    """Conditions, among them Ready."""
    discovered_backends: list[DiscoveredBackend] = Field(default_factory=list)
    """Backends and their health, as reported by the running gateway (or as discovered before it runs)."""
    backend_count: int | None = None
    """Number of backends."""
    tool_count: int | None = None
    """Tools advertised, as reported by the running gateway."""
    resource_count: int | None = None
    """Resources advertised, as reported by the running gateway."""
    prompt_count: int | None = None
    """Prompts advertised, as reported by the running gateway."""
    oidc_config_hash: str | None = None
    """Hash of the MCPOIDCConfig named by incomingAuth.oidcConfigRef (its status.configHash)."""
    authz_config_hash: str | None = None
    """Hash of the MCPAuthzConfig named by incomingAuth.authzConfigRef (its status.configHash)."""
    telemetry_config_hash: str | None = None
    """Hash of the MCPTelemetryConfig named by telemetryConfigRef (its status.configHash)."""


class VirtualMCPServer(Resource):
    """A gateway aggregating a group of MCP servers behind one endpoint."""

    info: ClassVar[KindInfo] = KindInfo(
        "VirtualMCPServer",
        "virtualmcpservers",
        ("vmcp", "virtualmcp"),
        columns=(
            *WORKLOAD_COLUMNS[:4],
            PrinterColumn("Backends", ".status.backendCount", "integer"),
            WORKLOAD_COLUMNS[4],
        ),
    )
    # v1beta1 (ToolHive's current shape) names the group at the top: `spec.groupRef: {name}`.
    # ToolHive's v1beta1 still accepts the superseded config.groupRef and config.name: read as the
    # current fields, with a warning (mcpfleet.api.superseded).
    version_changes: ClassVar[tuple[Change, ...]] = (
        Move("spec.config.groupRef", "spec.groupRef", prune=True),
        NameRef("spec.groupRef"),
        SUPERSEDED_GROUP_REF,
        SUPERSEDED_NAME,
        SUPERSEDED_SESSION_STORAGE,
        Deprecated("spec.config.telemetry", "spec.telemetryConfigRef (an MCPTelemetryConfig)"),
    )
    kind: Literal["VirtualMCPServer"] = "VirtualMCPServer"
    spec: VirtualMCPServerSpec
    status: VirtualMCPServerStatus = Field(default_factory=VirtualMCPServerStatus)


__all__ = [  # the kind's models, and the gateway's part (mcpfleet.api.gatewayconfig) re-exported
    "FREE_FORM",
    "LIVE_CONFIG_FIELDS",
    "RESTRICTED_PASSTHROUGH",
    "Aggregation",
    "BackendAuth",
    "CircuitBreaker",
    "CodeMode",
    "CompositeAnnotations",
    "CompositeTool",
    "ConflictResolutionConfig",
    "DiscoveredBackend",
    "ElicitationResponse",
    "FailureHandling",
    "GatewayConfig",
    "IncomingAuth",
    "Operational",
    "Optimizer",
    "OutgoingAuth",
    "PassthroughHeaderName",
    "PassthroughHeaders",
    "StaticBackend",
    "StepOnError",
    "Timeouts",
    "VirtualMCPConfig",
    "VirtualMCPServer",
    "VirtualMCPServerSpec",
    "VirtualMCPServerStatus",
    "WorkflowStep",
    "WorkloadToolConfig",
]
