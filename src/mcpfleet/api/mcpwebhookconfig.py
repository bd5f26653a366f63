"""MCPWebhookConfig: HTTP webhooks called on MCP requests, as ToolHive's webhook middleware.

A workload references it with `webhookConfigRef`. Before a request reaches the MCP server, each
`mutating` webhook (in order) receives the JSON-RPC request and may answer a JSON Patch on it; then each
`validating` webhook approves or denies it (a denial is a JSON-RPC error to the client); the proxy
enforces it (`mcpfleet.webhook`, docs/webhooks.md). With
`hmacSecretRef` the payload is signed (`X-ToolHive-Signature`); `failurePolicy` says what a webhook
that cannot be reached means (`fail`: the request is refused, `ignore`: it goes on).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator

from mcpfleet.api.duration import Duration, parse_duration
from mcpfleet.api.meta import (
    ApiModel,
    ConfigStatus,
    KindInfo,
    Rule,
    RuleModel,
    SecretKeyRef,
    config_columns,
)
from mcpfleet.api.resource import Resource

MAX_TIMEOUT_SECONDS = 30.0


class WebhookTLSConfig(RuleModel):
    """TLS toward the webhook."""

    rules = (
        Rule(
            cel="has(self.clientCertSecretRef) == has(self.clientKeySecretRef)",
            message="clientCertSecretRef and clientKeySecretRef are set together (mTLS)",
            field_path=".clientKeySecretRef",
            check=lambda s: (s.client_cert_secret_ref is None) == (s.client_key_secret_ref is None),
        ),
    )

    ca_secret_ref: SecretKeyRef | None = None
    """Secret key holding the PEM CA bundle that verifies the webhook's certificate."""
    client_cert_secret_ref: SecretKeyRef | None = None
    """Secret key holding the client certificate (mTLS)."""
    client_key_secret_ref: SecretKeyRef | None = None
    """Secret key holding the client certificate's private key (mTLS)."""
    insecure_skip_verify: bool = False
    """Do not verify the webhook's certificate (development only)."""


class WebhookEndpointBase(ApiModel):
    """What a webhook is, shared by the resource and the proxy's file (`mcpfleet.webhook.config`)."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    """Unique name of the webhook in its list."""
    url: str = Field(pattern=r"^https?://[^\s]+$", max_length=2048)
    """Endpoint called with the request."""
    timeout: Duration | None = None
    """Time limit of one call, at most 30s; 10s when unset."""
    failure_policy: Literal["fail", "ignore"] = "fail"
    """fail: an unreachable or failing webhook refuses the request; ignore: the request goes on."""

    @field_validator("timeout")
    @classmethod
    def _bounded(cls, value: str | None) -> str | None:
        if value is not None and parse_duration(value) > MAX_TIMEOUT_SECONDS:
            raise ValueError("at most 30s")
        return value


class WebhookSpec(WebhookEndpointBase):
    """One webhook."""

    hmac_secret_ref: SecretKeyRef | None = None
    """Secret key holding the HMAC-SHA256 key the payload is signed with (X-ToolHive-Signature)."""
    tls_config: WebhookTLSConfig | None = None
    """TLS settings."""


def _unique(hooks: list[WebhookSpec]) -> bool:
    names = [h.name for h in hooks]
    return len(names) == len(set(names))


WebhookList = Annotated[
    list[WebhookSpec],
    Field(
        default_factory=list,
        max_length=20,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    ),
]


class MCPWebhookConfigSpec(RuleModel):
    """Mutating and validating webhooks."""

    rules = (
        Rule(
            cel="(has(self.mutating) && size(self.mutating) > 0) || (has(self.validating) && size(self.validating) > 0)",
            message="at least one mutating or validating webhook is needed",
            field_path="",
            check=lambda s: bool(s.mutating or s.validating),
        ),
        Rule(
            cel="!has(self.mutating) || !has(self.validating) || "
            "self.mutating.all(m, !self.validating.exists(v, v.name == m.name))",
            message="webhook names must be unique across mutating and validating",
            field_path=".validating",
            check=lambda s: _unique([*s.mutating, *s.validating]),
        ),
    )

    mutating: WebhookList
    """Webhooks that may transform a request, called in order before the validating ones."""
    validating: WebhookList
    """Webhooks that approve or deny a request."""


class MCPWebhookConfig(Resource):
    """Shared request webhooks."""

    info: ClassVar[KindInfo] = KindInfo(
        "MCPWebhookConfig",
        "mcpwebhookconfigs",
        ("mwc",),
        columns=config_columns(),
        workload=False,
    )
    kind: Literal["MCPWebhookConfig"] = "MCPWebhookConfig"
    spec: MCPWebhookConfigSpec
    status: ConfigStatus = Field(default_factory=ConfigStatus)
