"""Spec fragments used by several kinds: resources, env, secrets, OIDC, header forwarding."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from mcpfleet.api.meta import ApiModel, ConfigMapKeyRef, LocalObjectReference, Rule, RuleModel, SecretKeyRef
from mcpfleet.api.meta import HttpTransport as HttpTransport  # defined with the basics: gatewayconfig uses it

QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"


class ResourceList(ApiModel):
    """CPU and memory quantities."""

    cpu: str | None = Field(default=None, pattern=QUANTITY_PATTERN)
    """CPU, e.g. 100m or 1."""
    memory: str | None = Field(default=None, pattern=QUANTITY_PATTERN)
    """Memory, e.g. 128Mi."""


class ResourceRequirements(ApiModel):
    """Compute resources of the MCP server container."""

    limits: ResourceList | None = None
    """Upper bounds."""
    requests: ResourceList | None = None
    """What the scheduler reserves."""


class EnvVar(ApiModel):
    """A plain environment variable. Secret values go in `secrets`, never here."""

    name: str = Field(min_length=1, pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
    """Variable name."""
    value: str
    """Variable value."""


class SecretRef(ApiModel):
    """A Secret key exposed to the MCP server as an environment variable."""

    name: str = Field(min_length=1)
    """Name of the Secret."""
    key: str = Field(min_length=1)
    """Key inside the Secret."""
    target_env_name: str | None = Field(default=None, pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
    """Environment variable to set; defaults to the key."""


class InlineOIDCConfig(ApiModel):
    """OIDC settings written in the manifest."""

    issuer: str = Field(pattern=r"^https?://")
    """Issuer URL; tokens must carry it as `iss`."""
    audience: str | None = None
    """Expected `aud` of tokens. Required unless `resourceUrl` is set (it is then the audience):
    without either the workload fails, naming this field."""
    jwks_url: str | None = Field(default=None, pattern=r"^https?://")
    """Where signing keys are fetched; discovered from the issuer when unset."""
    client_id: str | None = None
    """OAuth client id, for introspection."""
    client_secret_ref: SecretKeyRef | None = None
    """Secret holding the OAuth client secret."""
    introspection_url: str | None = Field(default=None, pattern=r"^https?://")
    """Token introspection endpoint (RFC 7662) for opaque tokens."""
    scopes: list[str] | None = None
    """Scopes advertised to clients."""
    insecure_allow_http: bool = Field(default=False, alias="insecureAllowHTTP")
    """Allow an http:// issuer (development only)."""
    jwks_allow_private_ip: bool = Field(default=False, alias="jwksAllowPrivateIP")
    """Let discovery / JWKS / introspection reach private, loopback or link-local addresses (refused
    by default, as in ToolHive; an issuer on a loopback host is allowed for development)."""


class ConfigMapOIDCRef(ConfigMapKeyRef):
    """A ConfigMap key holding the OIDC settings as JSON (or YAML); the key defaults to `oidc.json`,
    as in ToolHive's CRD."""

    key: str = Field(default="oidc.json", min_length=1)
    """Key inside the ConfigMap (default oidc.json)."""


class KubernetesOIDCConfig(ApiModel):
    """Validate Kubernetes service-account tokens."""

    audience: str = "mcpfleet"
    """Expected audience of the service-account token."""
    issuer: str = "https://kubernetes.default.svc"
    """Issuer of service-account tokens."""
    namespace: str | None = None
    """Only accept tokens of this namespace."""
    service_account: str | None = None
    """Only accept tokens of this service account."""


class OIDCConfig(RuleModel):
    """Where OIDC settings come from: exactly the block named by `type`."""

    rules = (
        Rule(
            cel="self.type == 'inline' ? has(self.inline) : !has(self.inline)",
            message="inline must be set exactly when type is inline",
            field_path=".inline",
            check=lambda s: (s.type == "inline") == (s.inline is not None),
        ),
        Rule(
            cel="self.type == 'configMap' ? has(self.configMap) : !has(self.configMap)",
            message="configMap must be set exactly when type is configMap",
            field_path=".configMap",
            check=lambda s: (s.type == "configMap") == (s.config_map is not None),
        ),
        Rule(
            cel="self.type == 'kubernetes' || !has(self.kubernetes)",
            message="kubernetes may only be set when type is kubernetes",
            field_path=".kubernetes",
            check=lambda s: s.type == "kubernetes" or s.kubernetes is None,
        ),
    )

    type: Literal["kubernetes", "configMap", "inline"] = "kubernetes"
    """kubernetes (service-account tokens), configMap (settings in a ConfigMap) or inline."""
    inline: InlineOIDCConfig | None = None
    """Settings written here."""
    config_map: ConfigMapOIDCRef | None = None
    """A ConfigMap key holding the settings as JSON (key default oidc.json)."""
    kubernetes: KubernetesOIDCConfig | None = None
    """Service-account token settings."""
    resource_url: str | None = None
    """The protected resource URL advertised to clients (RFC 9728)."""


class OIDCConfigRef(ApiModel):
    """Shared OIDC settings (an MCPOIDCConfig, or a ConfigMap) with this workload's own audience."""

    name: str = Field(min_length=1)
    """Name of the MCPOIDCConfig; when none has this name, of a ConfigMap holding the settings (key oidc.json)."""
    audience: str = Field(min_length=1)
    """Expected audience for this workload."""
    scopes: list[str] | None = None
    """Scopes advertised to clients."""
    resource_url: str | None = Field(default=None, max_length=2048)
    """This workload's protected-resource URL (RFC 9728), with an MCPOIDCConfig."""


class HeaderFromSecret(ApiModel):
    """A header whose value comes from a Secret."""

    header_name: str = Field(min_length=1, max_length=255)
    """Header to add."""
    value_secret_ref: SecretKeyRef
    """Secret key holding the header value."""


class HeaderForward(ApiModel):
    """Headers added to every request forwarded to the remote server."""

    add_plaintext_headers: dict[str, str] | None = None
    """Non-secret headers, name to value."""
    add_headers_from_secret: list[HeaderFromSecret] | None = None
    """Headers whose values come from Secrets."""


Transport = Literal["stdio", "streamable-http", "sse"]


MAX_POD_TEMPLATE_BYTES = 64 * 1024
"""A pod template patch larger than this is refused: it is merged on every reconcile."""


def _check_pod_template(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is None:
        return None
    extra = sorted(set(value) - {"metadata", "spec"})
    if extra:
        raise ValueError(f"a PodTemplateSpec has only metadata and spec, not {extra[0]!r}")
    for key in ("metadata", "spec"):
        if key in value and not isinstance(value[key], dict):
            raise ValueError(f"{key} must be an object")
    if len(json.dumps(value)) > MAX_POD_TEMPLATE_BYTES:
        raise ValueError(f"at most {MAX_POD_TEMPLATE_BYTES} bytes of JSON")
    return value


PodTemplatePatch = Annotated[
    dict[str, Any] | None,
    AfterValidator(_check_pod_template),
    Field(default=None, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True}),
]
"""A Kubernetes PodTemplateSpec merged onto the pod mcpfleet renders, as a strategic merge patch
(containers, volumes, env, … merge by name; other lists replace): the MCP server's container is
`mcp`, the proxy's `proxy`, the gateway's `vmcp`. Kubernetes only."""


class MetadataOverrides(ApiModel):
    """Labels and annotations added to an object mcpfleet renders (its own labels win)."""

    labels: dict[str, str] | None = None
    """Labels to add."""
    annotations: dict[str, str] | None = None
    """Annotations to add."""


class ProxyDeploymentOverrides(MetadataOverrides):
    """Overrides of the workload's Deployment (ToolHive's proxy Deployment)."""

    env: list[EnvVar] | None = None
    """Environment of the proxy container (the process in front of the MCP server), on both platforms."""
    image_pull_secrets: list[LocalObjectReference] | None = None
    """Secrets the pod pulls its images with."""
    pod_template_metadata_overrides: MetadataOverrides | None = None
    """Labels and annotations of the pods."""


class ResourceOverrides(ApiModel):
    """Labels, annotations and proxy environment added to what mcpfleet renders."""

    proxy_deployment: ProxyDeploymentOverrides | None = None
    """The Deployment, its pods and the proxy container."""
    proxy_service: MetadataOverrides | None = None
    """The Service."""


class TelemetryConfigRef(ApiModel):
    """A reference to an MCPTelemetryConfig in the same namespace."""

    name: str = Field(min_length=1)
    """Name of the MCPTelemetryConfig."""
    service_name: str | None = None
    """Telemetry service name of this workload; its own name when unset."""


class ConfigMapKeySelector(ApiModel):
    """A key of a ConfigMap (Kubernetes' ConfigMapKeySelector)."""

    name: str = Field(default="", max_length=253)
    """Name of the ConfigMap."""
    key: str = Field(min_length=1, max_length=253)
    """Key inside the ConfigMap."""
    optional: bool | None = None
    """Whether the ConfigMap or its key may be missing."""


class CABundleRef(ApiModel):
    """Where CA certificates for TLS verification come from (PEM, a ConfigMap key: not a secret)."""

    config_map_ref: ConfigMapKeySelector | None = None
    """The ConfigMap key holding the PEM bundle (key `ca.crt` by convention)."""
