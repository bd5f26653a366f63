"""The vMCP configuration file: `VirtualMCPServer.spec.config` plus what a renderer resolves.

`VMCPConfig` *is* the api's `GatewayConfig` (aggregation, composite tools, operational settings: the
models, defaults and rules of `mcpfleet.api.gatewayconfig`), plus the runtime fields the operator
and the local platform fill in: the backends with their discovered URLs, the referenced MCPToolConfig
specs inlined, and incoming / outgoing auth resolved to what the gateway needs (secret values only
as names of environment variables). camelCase on the wire, snake_case in Python; durations are the
api's `Duration` (read with `mcpfleet.api.duration.parse_duration`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_serializer, model_validator

from mcpfleet.api.gatewayconfig import GatewayConfig, StaticBackend
from mcpfleet.api.mcptoolconfig import MCPToolConfigSpec
from mcpfleet.api.meta import ApiModel
from mcpfleet.api.ratelimit import SessionStorage
from mcpfleet.auth.oidc import AuthConfigError, IncomingAuthSettings
from mcpfleet.configfile import DocumentError, parse_json_or_yaml
from mcpfleet.policy.config import AuthzDocument

# Outgoing auth as the gateway uses it: MCPExternalAuthConfigs resolved by the renderer, a secret
# value present only as the name of the environment variable that holds it.


class HeaderInjection(ApiModel):
    """A header added to every call (MCPExternalAuthConfig type headerInjection)."""

    header_name: str = Field(min_length=1)
    header_value: str | None = None
    header_value_env: str | None = None


class TokenExchange(ApiModel):
    """RFC 8693 token exchange of the caller's token (MCPExternalAuthConfig type tokenExchange)."""

    token_url: str
    audience: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    client_secret_env: str | None = None
    scopes: list[str] = Field(default_factory=list)
    subject_token_type: str | None = None
    subject_provider_name: str | None = None


class Backend(StaticBackend):
    """A backend the gateway calls: a static one, a group member with its observed URL, or an
    MCPServerEntry (the gateway connects to the remote directly, with its headers and CA bundle).
    `metadata.kind` says where it came from (MCPServer, MCPRemoteProxy, MCPServerEntry or static)."""

    headers: list[HeaderInjection] = Field(default_factory=list, max_length=50)
    """Headers added to every request to this backend (an MCPServerEntry's `headerForward`)."""
    ca_file: str | None = None
    """PEM CA bundle that verifies this backend's TLS certificate (an MCPServerEntry's `caBundleRef`)."""


class BearerToken(ApiModel):
    """A static token sent as `Authorization: Bearer <token>` (MCPExternalAuthConfig type bearerToken)."""

    token: str | None = None
    token_env: str | None = None
    """Environment variable holding the token (how a Kubernetes Secret reaches the pod)."""


class BackendAuthStrategy(ApiModel):
    """How the gateway authenticates to one backend."""

    type: Literal["unauthenticated", "header_injection", "bearer_token", "token_exchange"] = "unauthenticated"
    auth_config_ref: str | None = None
    """The MCPExternalAuthConfig this strategy was resolved from (reported in the status)."""
    header_injection: HeaderInjection | None = None
    bearer_token: BearerToken | None = None
    token_exchange: TokenExchange | None = None


class OutgoingAuthSettings(ApiModel):
    """Resolved outgoing auth: a strategy per backend, and the default for the others."""

    source: Literal["inline", "discovered"] = "inline"
    default: BackendAuthStrategy = Field(default_factory=BackendAuthStrategy)
    backends: dict[str, BackendAuthStrategy] = Field(default_factory=dict)

    def for_backend(self, name: str) -> BackendAuthStrategy:
        return self.backends.get(name, self.default)


class VMCPConfig(GatewayConfig):
    """The whole vMCP config file: the manifest's gateway configuration plus the resolved fields."""

    name: str = "vmcp"
    """The VirtualMCPServer's name."""
    group_ref: str | None = None
    """MCPGroup to follow (discovered mode); unset for a gateway of static backends only."""
    namespace: str | None = None
    """Kubernetes namespace for discovered mode and the status writer (else $POD_NAMESPACE)."""
    backends: list[Backend] = Field(default_factory=list)
    """Group members with their URLs, and the manifest's static backends."""
    tool_configs: dict[str, MCPToolConfigSpec] = Field(default_factory=dict)
    """MCPToolConfig specs referenced by `aggregation.tools[].toolConfigRef`, inlined by the renderer."""
    incoming_auth: IncomingAuthSettings = Field(default_factory=IncomingAuthSettings)
    """Who may call the gateway, resolved (OIDC settings inline or as a mounted file)."""
    outgoing_auth: OutgoingAuthSettings = Field(default_factory=OutgoingAuthSettings)
    session_storage: SessionStorage | None = None
    """The VirtualMCPServer's sessionStorage (its password arrives as MCPFLEET_REDIS_PASSWORD)."""
    """Per-backend credentials, resolved from MCPExternalAuthConfigs."""
    authz: AuthzDocument | None = None
    """Cedar authorization (`incomingAuth.authzConfig` resolved: the policies inline, or `authzFile`
    naming a mounted ConfigMap key); applied live when it changes (`policy.engine`)."""

    @field_serializer("incoming_auth")
    def _only_what_was_set(self, incoming: IncomingAuthSettings) -> dict[str, Any]:
        # `oidc` next to an `oidcFile` overrides the file's settings key by key (`resolved`): written
        # with its defaults, it would replace the file's scopes / insecureAllowHTTP / cache time.
        return incoming.model_dump(by_alias=True, exclude_unset=True, exclude_none=True, mode="json")

    @model_validator(mode="after")
    def _cross_checks(self) -> VMCPConfig:
        names = [b.name for b in self.backends]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"backends: duplicate backend name(s) {dupes}")
        for wl in self.aggregation.tools:
            if wl.tool_config_ref is not None and wl.tool_config_ref.name not in self.tool_configs:
                raise ValueError(
                    f"aggregation.tools[{wl.workload}].toolConfigRef: no toolConfigs entry named "
                    f"{wl.tool_config_ref.name!r}"
                )
        problems = self.incoming_auth.problems("incomingAuth")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class ConfigError(Exception):
    """The config file is missing or invalid; the message names the field."""


def load_config(path: str | Path) -> VMCPConfig:
    """Read and validate a YAML or JSON config file, raising ConfigError with field paths."""
    p = Path(path)
    try:
        # JSON (what `mcpfleet up` and tests may write) is read without loading PyYAML.
        raw = parse_json_or_yaml(p.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read config {p}: {exc}") from exc
    except DocumentError as exc:
        raise ConfigError(f"config {p} is not valid YAML: {exc}") from exc
    config = parse_config(raw or {}, source=str(p))
    try:
        # `incomingAuth.oidcFile` (a mounted ConfigMap key) is read once, at start.
        config.incoming_auth = config.incoming_auth.resolved(p.parent)
    except AuthConfigError as exc:
        raise ConfigError(f"{p}: incomingAuth.{exc}") from exc
    return config


def parse_config(raw: Any, source: str = "config") -> VMCPConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: top level must be a mapping")
    try:
        return VMCPConfig.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"]) or "<root>"
            lines.append(f"{loc}: {err['msg']}")
        raise ConfigError(f"{source}: invalid vMCP config:\n  " + "\n  ".join(lines)) from exc
