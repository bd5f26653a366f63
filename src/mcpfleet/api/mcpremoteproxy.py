"""MCPRemoteProxy: a proxy in front of an MCP server that runs elsewhere (remoteURL)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from mcpfleet.api.common import (
    HeaderForward,
    HttpTransport,
    OIDCConfig,
    OIDCConfigRef,
    PodTemplatePatch,
    ResourceOverrides,
    ResourceRequirements,
    TelemetryConfigRef,
)
from mcpfleet.api.meta import (
    AuthServerRef,
    KindInfo,
    LocalObjectReference,
    ProxyWorkloadStatus,
    RefersTo,
    Rule,
    RuleModel,
)
from mcpfleet.api.policy import AUTHZ_REF_EXCLUSIVE, AuditConfig, AuthzConfig
from mcpfleet.api.resource import Resource
from mcpfleet.api.versions import Change, Move, NameRef


class MCPRemoteProxySpec(RuleModel):
    """Desired state of a proxy toward a remote MCP server."""

    rules = (
        Rule(
            cel="!(has(self.oidcConfig) && has(self.oidcConfigRef))",
            message="set at most one of oidcConfig and oidcConfigRef",
            field_path=".oidcConfigRef",
            check=lambda s: not (s.oidc_config is not None and s.oidc_config_ref is not None),
        ),
        AUTHZ_REF_EXCLUSIVE,
    )

    remote_url: str = Field(alias="remoteURL", pattern=r"^https?://[^\s]+$", max_length=2048)
    """URL of the remote MCP server. On Kubernetes loopback, link-local, cloud-metadata and
    kubernetes.default endpoints are refused, private ones need allowPrivateEndpoint."""
    allow_private_endpoint: bool = False
    """Let remoteURL point at a private or in-cluster endpoint (RFC 1918, unique-local, *.cluster.local),
    e.g. a co-located backend reached in-mesh (ToolHive's field). Loopback, link-local, cloud-metadata
    and kubernetes.default stay refused. Kubernetes only: locally the proxy may front this machine's
    servers (link-local and metadata endpoints are refused there too)."""
    transport: HttpTransport = "streamable-http"
    """Transport of the remote server: streamable-http or sse."""
    proxy_port: int = Field(default=8080, ge=1, le=65535)
    """Port of the proxy (and of the Service)."""
    group_ref: Annotated[str | None, RefersTo("MCPGroup")] = Field(default=None, min_length=1)
    """Name of the MCPGroup this proxy belongs to."""
    tool_config_ref: Annotated[LocalObjectReference | None, RefersTo("MCPToolConfig")] = None
    """MCPToolConfig that filters and renames the remote tools."""
    external_auth_config_ref: Annotated[LocalObjectReference | None, RefersTo("MCPExternalAuthConfig")] = None
    """MCPExternalAuthConfig used toward the remote server."""
    auth_server_ref: Annotated[AuthServerRef | None, RefersTo("MCPExternalAuthConfig")] = None
    """MCPExternalAuthConfig (type embeddedAuthServer) whose OAuth 2.1 authorization server the proxy
    runs for this workload's clients; externalAuthConfigRef then only says how to reach the upstream."""
    header_forward: HeaderForward | None = None
    """Headers added to every forwarded request."""
    resources: ResourceRequirements | None = None
    """CPU and memory of the proxy container."""
    replicas: int | None = Field(default=None, ge=0)
    """Number of proxy replicas; 0 stops it."""
    service_account: str | None = None
    """Existing ServiceAccount to run as."""
    oidc_config: OIDCConfig | None = None
    """Incoming OIDC authentication settings."""
    oidc_config_ref: Annotated[OIDCConfigRef | None, RefersTo("MCPOIDCConfig")] = None
    """Reference to shared OIDC settings."""
    authz_config: AuthzConfig | None = None
    """Cedar authorization of tool calls, prompts and resources (ToolHive's shape)."""
    authz_config_ref: Annotated[LocalObjectReference | None, RefersTo("MCPAuthzConfig")] = None
    """MCPAuthzConfig with this workload's authorization policies (instead of authzConfig)."""
    webhook_config_ref: Annotated[LocalObjectReference | None, RefersTo("MCPWebhookConfig")] = None
    """MCPWebhookConfig whose mutating and validating webhooks the proxy calls on each request."""
    audit: AuditConfig | None = None
    """Audit logging: one JSON line per MCP request."""
    endpoint_prefix: str | None = Field(default=None, pattern=r"^/[A-Za-z0-9/_-]*$")
    """Path prefix the proxy is published under behind an ingress."""
    session_affinity: Literal["ClientIP", "None"] = "ClientIP"
    """Service session affinity."""
    trust_proxy_headers: bool = False
    """Trust X-Forwarded-* headers from an ingress."""
    pod_template_spec: PodTemplatePatch
    """A PodTemplateSpec merged onto the rendered pod (strategic merge; Kubernetes only)."""
    resource_overrides: ResourceOverrides | None = None
    """Labels and annotations of the Deployment, pods and Service; environment of the proxy."""
    telemetry_config_ref: Annotated[TelemetryConfigRef | None, RefersTo("MCPTelemetryConfig")] = None
    """MCPTelemetryConfig with this workload's OpenTelemetry / Prometheus settings."""

    @property
    def effective_replicas(self) -> int:
        return 1 if self.replicas is None else self.replicas


class MCPRemoteProxy(Resource):
    """A proxy that publishes a remote MCP server inside the fleet."""

    info: ClassVar[KindInfo] = KindInfo("MCPRemoteProxy", "mcpremoteproxies", ("rp", "mcprp"))
    version_changes: ClassVar[tuple[Change, ...]] = (
        NameRef("spec.groupRef"),
        Move("spec.remoteURL", "spec.remoteUrl"),
    )
    kind: Literal["MCPRemoteProxy"] = "MCPRemoteProxy"
    spec: MCPRemoteProxySpec
    status: ProxyWorkloadStatus = Field(default_factory=ProxyWorkloadStatus)
