"""The vMCP configuration file: a pydantic model the gateway reads.

The operator and the local platform *render* this model (it is the contract between the
control plane and the gateway), so field names follow ToolHive's VirtualMCPServer
`spec.config` (camelCase on the wire, snake_case in Python). Durations are Go-style strings
("30s", "1m30s", "250ms") and are exposed as float seconds by helper properties.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    Field,
    ValidationError,
    model_validator,
)

from mcpfleet.api.duration import Duration, parse_duration
from mcpfleet.api.meta import ApiModel
from mcpfleet.api.virtualmcpserver import CircuitBreaker as SpecCircuitBreaker
from mcpfleet.auth.oidc import AuthConfigError, IncomingAuth


class StaticBackend(ApiModel):
    """One pre-configured backend (static mode)."""

    name: str = Field(min_length=1)
    url: str = Field(pattern=r"^https?://")
    transport: Literal["streamable-http", "sse"] = "streamable-http"
    metadata: dict[str, str] = Field(default_factory=dict)


class ToolAnnotationsOverride(ApiModel):
    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None


class ToolOverride(ApiModel):
    """Rename / re-describe one backend tool (MCPToolConfig semantics)."""

    # Kept apart from api ToolOverride: adds `annotations`, and an annotations-only override is valid here.

    name: str | None = None
    description: str | None = None
    annotations: ToolAnnotationsOverride | None = None


class ToolConfigRef(ApiModel):
    name: str


class ToolConfig(ApiModel):
    """The spec of an MCPToolConfig, inlined into the rendered config under `toolConfigs`."""

    # Kept apart from api MCPToolConfigSpec: empty-collection defaults and the vmcp ToolOverride.

    tools_filter: list[str] = Field(default_factory=list)
    tools_override: dict[str, ToolOverride] = Field(default_factory=dict)


class WorkloadToolConfig(ApiModel):
    """Per-backend filter and overrides (`aggregation.tools[]`)."""

    # Kept apart from the api model: the gateway relies on empty-collection defaults (api: None).

    workload: str = Field(min_length=1)
    filter: list[str] = Field(default_factory=list)
    overrides: dict[str, ToolOverride] = Field(default_factory=dict)
    exclude_all: bool = False
    tool_config_ref: ToolConfigRef | None = None


class ConflictResolutionConfig(ApiModel):
    # Kept apart from the api model: priorityOrder defaults to [] (api: None), no prefixFormat pattern.
    prefix_format: str = "{workload}_"
    priority_order: list[str] = Field(default_factory=list)


class Aggregation(ApiModel):
    # Kept apart from the api model: non-None defaults the gateway relies on; the priorityOrder rule is the CRD's.
    conflict_resolution: Literal["prefix", "priority", "manual"] = "prefix"
    conflict_resolution_config: ConflictResolutionConfig = Field(default_factory=ConflictResolutionConfig)
    tools: list[WorkloadToolConfig] = Field(default_factory=list)
    exclude_all_tools: bool = False


class OnError(ApiModel):
    # Kept apart from api StepOnError: retryCount defaults to 0 (api: None) and retryDelay is a lenient Duration.
    action: Literal["abort", "continue", "retry"] = "abort"
    retry_count: int = Field(default=0, ge=0)
    retry_delay: Duration | None = None


class WorkflowStep(ApiModel):
    """One step of a composite tool; only `type: tool` steps are executed by this gateway."""

    # Kept apart from the api model: non-None defaults, `defaultResults`, and no CRD id/length limits.

    id: str = Field(min_length=1)
    type: Literal["tool"] = "tool"
    tool: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    condition: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    on_error: OnError = Field(default_factory=OnError)
    timeout: Duration | None = None
    default_results: dict[str, Any] | None = None


class CompositeTool(ApiModel):
    # Kept apart from the api model: non-None defaults (description, parameters) and the extra `output`.
    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    steps: list[WorkflowStep] = Field(min_length=1)
    timeout: Duration | None = None
    output: dict[str, Any] | None = None


class HeaderInjection(ApiModel):
    header_name: str = Field(min_length=1)
    header_value: str | None = None
    header_value_env: str | None = None


class TokenExchange(ApiModel):
    token_url: str
    audience: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    client_secret_env: str | None = None
    scopes: list[str] = Field(default_factory=list)
    subject_token_type: str | None = None
    subject_provider_name: str | None = None


class BearerToken(ApiModel):
    """A static token sent as `Authorization: Bearer <token>` (MCPExternalAuthConfig type bearerToken)."""

    token: str | None = None
    token_env: str | None = None
    """Environment variable holding the token (how a Kubernetes Secret reaches the pod)."""


class BackendAuthStrategy(ApiModel):
    type: Literal["unauthenticated", "header_injection", "bearer_token", "token_exchange"] = "unauthenticated"
    header_injection: HeaderInjection | None = None
    bearer_token: BearerToken | None = None
    token_exchange: TokenExchange | None = None


class OutgoingAuth(ApiModel):
    source: Literal["inline", "discovered"] = "inline"
    default: BackendAuthStrategy = Field(default_factory=BackendAuthStrategy)
    backends: dict[str, BackendAuthStrategy] = Field(default_factory=dict)

    def for_backend(self, name: str) -> BackendAuthStrategy:
        return self.backends.get(name, self.default)


CircuitBreaker = SpecCircuitBreaker


class FailureHandling(ApiModel):
    # Kept apart from the api model: circuitBreaker defaults to an instance (api: None); lenient Durations.
    health_check_interval: Duration = "30s"
    health_check_timeout: Duration = "10s"
    unhealthy_threshold: int = Field(default=3, ge=1)
    partial_failure_mode: Literal["fail", "best_effort"] = "fail"
    status_reporting_interval: Duration = "30s"
    circuit_breaker: CircuitBreaker = Field(default_factory=CircuitBreaker)


class Timeouts(ApiModel):
    # Kept apart from the api model: perWorkload defaults to {} (api: None), plus for_backend().
    default: Duration = "30s"
    per_workload: dict[str, str] = Field(default_factory=dict)

    def for_backend(self, name: str) -> float:
        return parse_duration(self.per_workload.get(name, self.default))


class Operational(ApiModel):
    # Kept apart from the api model: non-None sub-model defaults; logLevel is any string here.
    log_level: str | None = None
    timeouts: Timeouts = Field(default_factory=Timeouts)
    failure_handling: FailureHandling = Field(default_factory=FailureHandling)


class VMCPConfig(ApiModel):
    """The whole vMCP config file (ToolHive `VirtualMCPServer.spec.config` shape)."""

    name: str = "vmcp"
    group_ref: str | None = None
    backends: list[StaticBackend] = Field(default_factory=list)
    aggregation: Aggregation = Field(default_factory=Aggregation)
    composite_tools: list[CompositeTool] = Field(default_factory=list)
    # MCPToolConfig specs referenced by `aggregation.tools[].toolConfigRef`, inlined by the renderer.
    tool_configs: dict[str, ToolConfig] = Field(default_factory=dict)
    incoming_auth: IncomingAuth = Field(default_factory=IncomingAuth)
    outgoing_auth: OutgoingAuth = Field(default_factory=OutgoingAuth)
    operational: Operational = Field(default_factory=Operational)
    # Kubernetes namespace for discovered mode and the status writer (else $POD_NAMESPACE).
    namespace: str | None = None

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
        for ct in self.composite_tools:
            ids = {s.id for s in ct.steps}
            for s in ct.steps:
                for dep in s.depends_on:
                    if dep not in ids:
                        raise ValueError(
                            f"compositeTools[{ct.name}].steps[{s.id}].dependsOn: unknown step {dep!r}"
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
        raw = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read config {p}: {exc}") from exc
    except yaml.YAMLError as exc:
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
