"""MCPServer: one MCP server workload (a package run by the runner, or a container image)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field

from mcpfleet.api.common import (
    EnvVar,
    HttpTransport,
    OIDCConfig,
    OIDCConfigRef,
    PodTemplatePatch,
    ResourceOverrides,
    ResourceRequirements,
    SecretRef,
    TelemetryConfigRef,
    Transport,
)
from mcpfleet.api.hostvolume import MAX_VOLUMES, UNIQUE_MOUNT_PATHS, UNIQUE_NAMES, HostVolume
from mcpfleet.api.meta import (
    AuthServerRef,
    KindInfo,
    LocalObjectReference,
    ProxyWorkloadStatus,
    RefersTo,
    Rule,
    RuleModel,
)
from mcpfleet.api.permissions import PermissionProfileRef
from mcpfleet.api.policy import AUTHZ_REF_EXCLUSIVE, AuditConfig, AuthzConfig
from mcpfleet.api.ratelimit import (
    NEEDS_REDIS_MESSAGE,
    RateLimiting,
    SessionStorage,
    needs_redis,
    needs_redis_rule,
)
from mcpfleet.api.resource import Resource
from mcpfleet.api.versions import Change, NameRef

# A package (`uvx://[@SCOPE/]NAME[@VERSION]`) or a container image reference. Neither may start with
# `-`: `uvx://--version` would be read as an option of uvx / npx (option injection, issue 27). An
# image's tag holds no `/`, so `uvx://...` / `npx://...` can only match as a package (RE2: no lookahead).
IMAGE_PATTERN = (
    r"^((uvx|npx)://(@[^\s@/-][^\s@/]*/)?[^\s@-][^\s@]*(@[^\s@]+)?"
    r"|[^\s:/-][^\s:/]*(:[0-9]+)?(/[^\s]+)*(:[^\s/]+)?(@sha256:[a-f0-9]{64})?)$"
)
OPTION_LIKE_IMAGE = (
    "must not start with '-' (it would be read as an option of uvx, npx or the container tool)"
)


def refuse_option_like_image(value: Any) -> Any:
    """A clear message for the one refusal of IMAGE_PATTERN that is an attack, not a typo (the pattern
    stays the rule, and the CRD's)."""
    if isinstance(value, str):
        name = value.partition("://")[2] if value.startswith(("uvx://", "npx://")) else value
        if name.startswith("-") or name.startswith("@-"):
            raise ValueError(f"{value[:64]!r}: the package or image name {OPTION_LIKE_IMAGE}")
    return value


class MCPServerSpec(RuleModel):
    """Desired state of an MCP server."""

    rules = (
        Rule(
            cel="self.transport != 'stdio' || !has(self.replicas) || self.replicas <= 1",
            message="stdio servers have at most 1 replica (one process owns the stdio stream)",
            field_path=".replicas",
            check=lambda s: s.transport != "stdio" or s.replicas is None or s.replicas <= 1,
        ),
        Rule(
            cel="!(has(self.oidcConfig) && has(self.oidcConfigRef))",
            message="set at most one of oidcConfig and oidcConfigRef",
            field_path=".oidcConfigRef",
            check=lambda s: not (s.oidc_config is not None and s.oidc_config_ref is not None),
        ),
        AUTHZ_REF_EXCLUSIVE,
        Rule(
            cel="self.transport == 'stdio' || !self.image.startsWith('uvx://') && !self.image.startsWith('npx://')"
            " || has(self.mcpPort)",
            message="an http transport with a uvx:// or npx:// package needs mcpPort (the port the package listens on)",
            field_path=".mcpPort",
            check=lambda s: (
                s.transport == "stdio"
                or not (s.image.startswith("uvx://") or s.image.startswith("npx://"))
                or s.mcp_port is not None
            ),
        ),
        Rule(
            cel=needs_redis_rule("self.rateLimiting", "self.sessionStorage", "self.replicas"),
            message=NEEDS_REDIS_MESSAGE,
            field_path=".sessionStorage",
            check=lambda s: needs_redis(s.rate_limiting, s.session_storage, s.replicas),
        ),
        Rule(
            cel="!has(self.rateLimiting) || ((!has(self.rateLimiting.perUser) && (!has(self.rateLimiting.tools)"
            " || self.rateLimiting.tools.all(t, !has(t.perUser)))) || has(self.oidcConfig) || has(self.oidcConfigRef))",
            message="perUser rate limiting requires authentication (oidcConfig or oidcConfigRef)",
            field_path=".rateLimiting",
            check=lambda s: (
                s.rate_limiting is None
                or not s.rate_limiting.needs_user
                or s.oidc_config is not None
                or s.oidc_config_ref is not None
            ),
        ),
        UNIQUE_NAMES,
        UNIQUE_MOUNT_PATHS,
    )

    image: Annotated[str, BeforeValidator(refuse_option_like_image)] = Field(
        min_length=1, pattern=IMAGE_PATTERN
    )
    """What to run: `uvx://PACKAGE[@VERSION]` (PyPI, run with uv), `npx://PACKAGE[@VERSION]` (npm),
    or a container image reference (Kubernetes only); never starting with `-`."""
    transport: Transport = "stdio"
    """How the server speaks MCP: stdio, streamable-http or sse."""
    proxy_mode: HttpTransport = "streamable-http"
    """How clients reach a stdio server through the proxy: streamable-http or sse."""
    proxy_port: int = Field(default=8080, ge=1, le=65535)
    """Port of the proxy (and of the Service) on Kubernetes."""
    mcp_port: int | None = Field(default=None, ge=1, le=65535)
    """Port the MCP server itself listens on (http transports)."""
    args: list[str] | None = None
    """Arguments passed to the server."""
    env: list[EnvVar] | None = None
    """Plain environment variables."""
    secrets: list[SecretRef] | None = None
    """Secret keys exposed as environment variables."""
    resources: ResourceRequirements | None = None
    """CPU and memory of the server container."""
    replicas: int | None = Field(default=None, ge=0)
    """Number of replicas; 0 stops the server. stdio servers run at most 1."""
    group_ref: Annotated[str | None, RefersTo("MCPGroup")] = Field(default=None, min_length=1)
    """Name of the MCPGroup this server belongs to."""
    tool_config_ref: Annotated[LocalObjectReference | None, RefersTo("MCPToolConfig")] = None
    """MCPToolConfig that filters and renames this server's tools."""
    external_auth_config_ref: Annotated[LocalObjectReference | None, RefersTo("MCPExternalAuthConfig")] = None
    """MCPExternalAuthConfig used toward this server's upstream."""
    auth_server_ref: Annotated[AuthServerRef | None, RefersTo("MCPExternalAuthConfig")] = None
    """MCPExternalAuthConfig (type embeddedAuthServer) whose OAuth 2.1 authorization server the proxy
    runs for this workload's clients; externalAuthConfigRef then only says how to reach the upstream."""
    service_account: str | None = None
    """Existing ServiceAccount to run as; one is created when unset."""
    oidc_config: OIDCConfig | None = None
    """Incoming OIDC authentication settings."""
    oidc_config_ref: Annotated[OIDCConfigRef | None, RefersTo("MCPOIDCConfig")] = None
    """Reference to shared OIDC settings."""
    authz_config: AuthzConfig | None = None
    """Cedar authorization of tool calls, prompts and resources (ToolHive's shape)."""
    authz_config_ref: Annotated[LocalObjectReference | None, RefersTo("MCPAuthzConfig")] = None
    """MCPAuthzConfig with this workload's authorization policies (instead of authzConfig)."""
    audit: AuditConfig | None = None
    """Audit logging: one JSON line per MCP request."""
    endpoint_prefix: str | None = Field(default=None, pattern=r"^/[A-Za-z0-9/_-]*$")
    """Path prefix the server is published under behind an ingress."""
    session_affinity: Literal["ClientIP", "None"] = "ClientIP"
    """Service session affinity."""
    trust_proxy_headers: bool = False
    """Trust X-Forwarded-* headers from an ingress."""
    rate_limiting: RateLimiting | None = None
    """Token buckets per server and per user, overall and per tool; requests over the limit get a
    JSON-RPC error with a retry-after (HTTP 429 + Retry-After)."""
    session_storage: SessionStorage | None = None
    """Redis shared by the replicas (rate-limit buckets); required for rateLimiting with replicas > 1."""
    pod_template_spec: PodTemplatePatch
    """A PodTemplateSpec merged onto the rendered pod (strategic merge; Kubernetes only)."""
    resource_overrides: ResourceOverrides | None = None
    """Labels and annotations of the Deployment, pods and Service; environment of the proxy."""
    telemetry_config_ref: Annotated[TelemetryConfigRef | None, RefersTo("MCPTelemetryConfig")] = None
    """MCPTelemetryConfig with this workload's OpenTelemetry / Prometheus settings."""
    webhook_config_ref: Annotated[LocalObjectReference | None, RefersTo("MCPWebhookConfig")] = None
    """MCPWebhookConfig whose mutating and validating webhooks the proxy calls on each request."""
    permission_profile: PermissionProfileRef | None = None
    """What the server process may reach (ToolHive's shape): builtin `none` (no network) or `network`
    (outbound open), or a profile document in a ConfigMap key (read / write paths, outbound
    allow-lists). Unset: builtin `network`, with the filesystem isolated all the same
    (docs/security.md, "What a server can and cannot reach")."""
    volumes: list[HostVolume] | None = Field(
        default=None,
        max_length=MAX_VOLUMES,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Host paths mounted into the MCP server's container (ToolHive's shape): a hostPath volume on
    Kubernetes, a bind into the server's sandbox or container locally (read-only unless
    `readOnly: false`)."""

    @property
    def is_package(self) -> bool:
        return self.image.startswith(("uvx://", "npx://"))

    @property
    def effective_replicas(self) -> int:
        replicas = 1 if self.replicas is None else self.replicas
        return min(replicas, 1) if self.transport == "stdio" else replicas


class MCPServer(Resource):
    """An MCP server run by mcpfleet."""

    info: ClassVar[KindInfo] = KindInfo("MCPServer", "mcpservers", ("mcps", "mcpserver"))
    version_changes: ClassVar[tuple[Change, ...]] = (NameRef("spec.groupRef"),)
    kind: Literal["MCPServer"] = "MCPServer"
    spec: MCPServerSpec
    status: ProxyWorkloadStatus = Field(default_factory=ProxyWorkloadStatus)
