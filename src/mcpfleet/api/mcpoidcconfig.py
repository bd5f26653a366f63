"""MCPOIDCConfig: incoming OIDC settings shared by the servers, proxies and gateways that reference it.

A workload names it in `oidcConfigRef` (with its own `audience`, `scopes`, `resourceUrl`); the result is
exactly what the same settings written inline in `oidcConfig` give (`reconcile/mcpoidcconfig.py`).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from mcpfleet.api.common import CABundleRef
from mcpfleet.api.meta import (
    ApiModel,
    ConfigStatus,
    KindInfo,
    PrinterColumn,
    Rule,
    RuleModel,
    SecretKeyRef,
    config_columns,
)
from mcpfleet.api.resource import Resource

URL_PATTERN = r"^https?://[^\s]+$"


class InlineOIDCSettings(ApiModel):
    """OIDC provider settings written in the object."""

    issuer: str = Field(pattern=URL_PATTERN, max_length=2048)
    """Issuer URL; tokens must carry it as `iss`."""
    jwks_url: str | None = Field(default=None, pattern=URL_PATTERN, max_length=2048)
    """Where signing keys are fetched; discovered from the issuer when unset."""
    introspection_url: str | None = Field(default=None, pattern=URL_PATTERN, max_length=2048)
    """Token introspection endpoint (RFC 7662) for opaque tokens."""
    client_id: str | None = Field(default=None, max_length=512)
    """OAuth client id, for introspection."""
    client_secret_ref: SecretKeyRef | None = None
    """Secret holding the OAuth client secret (passed as a secretKeyRef env, never in a ConfigMap)."""
    ca_bundle_ref: CABundleRef | None = None
    """CA certificates for the provider's TLS (a ConfigMap key; Kubernetes only)."""
    jwks_auth_token_path: str | None = Field(default=None, max_length=4096, pattern=r"^/[^\s]*$")
    """File holding a bearer token sent with the JWKS request."""
    jwks_allow_private_ip: bool = Field(default=False, alias="jwksAllowPrivateIP")
    """Let discovery / JWKS / introspection reach private, loopback or link-local addresses (refused by
    default, as in ToolHive; an issuer on a loopback host is allowed for development)."""
    protected_resource_allow_private_ip: bool = Field(default=False, alias="protectedResourceAllowPrivateIP")
    """Allow a private protected-resource URL (accepted for ToolHive manifests; never blocked)."""
    insecure_allow_http: bool = Field(default=False, alias="insecureAllowHTTP")
    """Allow an http:// issuer (development only)."""


class KubernetesServiceAccountOIDC(ApiModel):
    """Validate Kubernetes service-account tokens (the API server is the issuer)."""

    issuer: str = Field(default="https://kubernetes.default.svc", pattern=URL_PATTERN, max_length=2048)
    """Issuer of service-account tokens."""
    jwks_url: str | None = Field(default=None, pattern=URL_PATTERN, max_length=2048)
    """Where signing keys are fetched; the API server's /openid/v1/jwks when unset."""
    introspection_url: str | None = Field(default=None, pattern=URL_PATTERN, max_length=2048)
    """Token introspection endpoint (accepted for ToolHive manifests; tokens are checked by signature)."""
    namespace: str | None = Field(default=None, max_length=63)
    """Only accept tokens of this namespace."""
    service_account: str | None = Field(default=None, max_length=253)
    """Only accept tokens of this service account."""
    use_cluster_auth: bool | None = None
    """Use the pod's service-account token and the cluster CA to fetch the JWKS (always done)."""


class MCPOIDCConfigSpec(RuleModel):
    """Where the OIDC settings come from: exactly the block named by `type`."""

    rules = (
        Rule(
            cel="self.type == 'kubernetesServiceAccount' ? has(self.kubernetesServiceAccount) "
            ": !has(self.kubernetesServiceAccount)",
            message="kubernetesServiceAccount must be set exactly when type is kubernetesServiceAccount",
            field_path=".kubernetesServiceAccount",
            check=lambda s: (
                (s.type == "kubernetesServiceAccount") == (s.kubernetes_service_account is not None)
            ),
        ),
        Rule(
            cel="self.type == 'inline' ? has(self.inline) : !has(self.inline)",
            message="inline must be set exactly when type is inline",
            field_path=".inline",
            check=lambda s: (s.type == "inline") == (s.inline is not None),
        ),
    )

    type: Literal["kubernetesServiceAccount", "inline"]
    """kubernetesServiceAccount (service-account tokens) or inline (an OIDC provider)."""
    inline: InlineOIDCSettings | None = None
    """Settings of an OIDC provider, for type inline."""
    kubernetes_service_account: KubernetesServiceAccountOIDC | None = None
    """Service-account token settings, for type kubernetesServiceAccount."""


class MCPOIDCConfig(Resource):
    """Shared incoming OIDC settings."""

    info: ClassVar[KindInfo] = KindInfo(
        "MCPOIDCConfig",
        "mcpoidcconfigs",
        ("mcpoidc",),
        columns=config_columns(PrinterColumn("Source", ".spec.type")),
        workload=False,
    )
    kind: Literal["MCPOIDCConfig"] = "MCPOIDCConfig"
    spec: MCPOIDCConfigSpec
    status: ConfigStatus = Field(default_factory=ConfigStatus)
