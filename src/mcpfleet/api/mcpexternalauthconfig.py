"""MCPExternalAuthConfig: how a workload authenticates toward its upstream (token exchange, headers)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from mcpfleet.api.meta import ApiModel, ConfigStatus, KindInfo, PrinterColumn, Rule, RuleModel, SecretKeyRef
from mcpfleet.api.resource import Resource

AuthType = Literal["tokenExchange", "headerInjection", "bearerToken", "unauthenticated"]


class TokenExchangeConfig(ApiModel):
    """RFC 8693 token exchange: the client's token is swapped for one the upstream accepts."""

    token_url: str = Field(pattern=r"^https?://[^\s]+$")
    """Token endpoint of the authorization server."""
    audience: str = Field(min_length=1)
    """Audience requested for the exchanged token."""
    client_id: str | None = None
    """OAuth client id used for the exchange."""
    client_secret_ref: SecretKeyRef | None = None
    """Secret holding the OAuth client secret."""
    scopes: list[str] | None = None
    """Scopes requested."""
    subject_token_type: str | None = Field(
        default=None,
        pattern=r"^(access_token|id_token|jwt|urn:ietf:params:oauth:token-type:(access_token|id_token|jwt))?$",
    )
    """Type of the incoming token (access_token by default)."""
    external_token_header_name: str | None = None
    """Header that carries the exchanged token; Authorization: Bearer when unset."""


class HeaderInjectionConfig(ApiModel):
    """A header with a secret value added to every upstream request."""

    header_name: str = Field(min_length=1, max_length=255)
    """Header to add."""
    value_secret_ref: SecretKeyRef
    """Secret key holding the header value."""


class BearerTokenConfig(ApiModel):
    """A static bearer token sent to the upstream."""

    token_secret_ref: SecretKeyRef
    """Secret key holding the token."""


def _block_rule(type_name: str, field_name: str, attr: str) -> Rule:
    return Rule(
        cel=f"self.type == '{type_name}' ? has(self.{field_name}) : !has(self.{field_name})",
        message=f"{field_name} must be set exactly when type is {type_name}",
        field_path=f".{field_name}",
        check=lambda s: (s.type == type_name) == (getattr(s, attr) is not None),
    )


class MCPExternalAuthConfigSpec(RuleModel):
    """Outgoing authentication settings: `type` names the one block that must be set."""

    rules = (
        _block_rule("tokenExchange", "tokenExchange", "token_exchange"),
        _block_rule("headerInjection", "headerInjection", "header_injection"),
        _block_rule("bearerToken", "bearerToken", "bearer_token"),
    )

    type: AuthType
    """tokenExchange, headerInjection, bearerToken or unauthenticated."""
    token_exchange: TokenExchangeConfig | None = None
    """Settings for type tokenExchange."""
    header_injection: HeaderInjectionConfig | None = None
    """Settings for type headerInjection."""
    bearer_token: BearerTokenConfig | None = None
    """Settings for type bearerToken."""


class MCPExternalAuthConfig(Resource):
    """Reusable outgoing authentication settings."""

    info: ClassVar[KindInfo] = KindInfo(
        "MCPExternalAuthConfig",
        "mcpexternalauthconfigs",
        ("extauth", "mcpextauth"),
        columns=(
            PrinterColumn("Type", ".spec.type"),
            PrinterColumn("Valid", '.status.conditions[?(@.type=="Valid")].status'),
            PrinterColumn("References", ".status.referencingWorkloads[*].name"),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
        ),
        workload=False,
    )
    kind: Literal["MCPExternalAuthConfig"] = "MCPExternalAuthConfig"
    spec: MCPExternalAuthConfigSpec
    status: ConfigStatus = Field(default_factory=ConfigStatus)
