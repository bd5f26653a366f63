"""Shared building blocks of every mcpfleet resource: API group, base model, metadata, conditions, status.

Every kind in `mcpfleet.api` is a pydantic model whose field names are the camelCase names users write
in YAML. The same models validate manifests on the local platform and generate the CRD schemas
(`mcpfleet.api.crdgen`), so a rule lives in exactly one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

GROUP = "mcpfleet.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
CATEGORY = "mcpfleet"

HttpTransport = Literal["streamable-http", "sse"]
"""How an MCP server is reached over HTTP: streamable HTTP, or the older HTTP+SSE transport."""

# Labels and annotations owned by mcpfleet.
LABEL_REGISTRY = f"{GROUP}/registry"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_COMPONENT = "app.kubernetes.io/component"
ANNOTATION_CONFIG_CHECKSUM = f"{GROUP}/config-checksum"

DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def location(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a field path: `sources[1].syncPolicy.interval` (validator frames
    such as `function-after[...]` left out)."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in {"function-after", "function-before"} or "[" in str(part):
            continue
        else:
            path += f".{part}" if path else str(part)
    return path


class ApiModel(BaseModel):
    """Base of every spec/status model: camelCase on the wire, unknown fields refused, docstrings as docs."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        # Attribute docstrings become field descriptions in `fielddocs.attach()`, for the CRDs and
        # the reference only (pydantic's use_attribute_docstrings costs every service start).
        validate_assignment=False,
        # Each model's validator is built when first used, not when its class is defined: a service
        # validates a few of these models (its config) and imports many (issue 19: ~40 ms of the
        # registry's start). The result of validation is the same either way.
        defer_build=True,
    )

    def dump(self) -> dict[str, Any]:
        """The wire form: camelCase keys, unset optional fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


@dataclass(frozen=True)
class Rule:
    """A cross-field constraint written once: as CEL for the API server and as Python for local validation.

    `check` receives the model instance and returns True when the object is valid; `detail`, when
    given, says precisely what is wrong for Python callers (CEL messages are fixed strings).
    """

    cel: str
    message: str
    field_path: str
    check: Callable[[Any], bool]
    reason: str = "FieldValueInvalid"
    detail: Callable[[Any], str] | None = None

    def as_cel(self) -> dict[str, str]:
        rule = {"rule": self.cel, "message": self.message}
        if self.field_path:
            rule["fieldPath"] = self.field_path
        if self.reason != "FieldValueInvalid":
            rule["reason"] = self.reason
        return rule


class RuleModel(ApiModel):
    """A model carrying cross-field `Rule`s; they run after field validation and are emitted as CEL."""

    rules: ClassVar[tuple[Rule, ...]] = ()

    @model_validator(mode="after")
    def _check_rules(self) -> RuleModel:
        for rule in self.rules:
            if not rule.check(self):
                location = f"{rule.field_path}: " if rule.field_path else ""
                message = rule.detail(self) if rule.detail else rule.message
                raise ValueError(f"{location}{message}")
        return self


@dataclass(frozen=True)
class RefersTo:
    """Field metadata (`Annotated[..., RefersTo("MCPToolConfig")]`): the field names an object of
    `kind` in the same namespace, by its `name` (or, for a string field, the string itself).

    `api.references` reads these marks to derive each kind's references (which field names which
    kind), so the operator's dependency tracking is never re-described over raw dicts."""

    kind: str


class LocalObjectReference(ApiModel):
    """A reference to another object in the same namespace."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the referenced object."""


class AuthServerRef(ApiModel):
    """A workload's embedded OAuth 2.1 authorization server: an MCPExternalAuthConfig of type
    embeddedAuthServer (ToolHive's `authServerRef`). With it, `externalAuthConfigRef` is left for the
    credentials toward the upstream (headers, bearer token), as in ToolHive."""

    kind: Literal["MCPExternalAuthConfig"] = "MCPExternalAuthConfig"
    """Kind of the referenced object; MCPExternalAuthConfig is the only one."""
    name: str = Field(min_length=1, max_length=253)
    """Name of the MCPExternalAuthConfig (type embeddedAuthServer) in the same namespace."""


class SecretKeyRef(ApiModel):
    """A key of a Secret in the object's namespace: the only way mcpfleet takes secret values."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the Secret."""
    key: str = Field(min_length=1)
    """Key inside the Secret."""


class ConfigMapKeyRef(ApiModel):
    """A key of a ConfigMap in the object's namespace."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the ConfigMap."""
    key: str = Field(min_length=1)
    """Key inside the ConfigMap."""


class ObjectMeta(BaseModel):
    """The parts of Kubernetes object metadata that mcpfleet reads; anything else is kept as is."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, alias_generator=to_camel)

    name: str = Field(min_length=1, max_length=253, pattern=DNS_LABEL_PATTERN)
    """Lower-case letters, digits and '-' (a DNS label's characters): Kubernetes requires a DNS-1123
    subdomain of at most 253 characters, and every child of a workload (Service, Deployment) is a
    DNS label named after it, so no '.' either. Never a path component that could climb ('..', '/')."""
    namespace: str = Field(default="default", min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)
    """Exactly Kubernetes' rule for a namespace: a DNS-1123 label of at most 63 characters. The API
    server enforces it before any CRD schema runs; the local platform must refuse the same values,
    since it names folders after the namespace."""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    generation: int = 1
    uid: str | None = None
    resource_version: str | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None


ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(ApiModel):
    """A standard Kubernetes condition (metav1.Condition)."""

    type: str = Field(
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
    """Type of the condition, e.g. Ready."""
    status: ConditionStatus
    """True, False or Unknown."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation the condition was computed from."""
    last_transition_time: str
    """When the status last changed (RFC 3339)."""
    reason: str = Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    """A CamelCase machine-readable reason."""
    message: str = Field(default="", max_length=32768)
    """A human-readable explanation."""


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def find_condition(conditions: list[Condition], type: str) -> Condition | None:
    return next((c for c in conditions if c.type == type), None)


def set_condition(
    conditions: list[Condition],
    *,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    observed_generation: int | None,
    now: str | None = None,
) -> list[Condition]:
    """Return `conditions` with `type` set, keeping lastTransitionTime when the status did not change.

    Keeping the transition time stable is what makes an unchanged status compare equal, so a
    resync writes nothing.
    """
    old = find_condition(conditions, type)
    unchanged = old is not None and old.status == status
    new = Condition(
        type=type,
        status=status,
        reason=reason,
        message=message,
        observed_generation=observed_generation,
        last_transition_time=old.last_transition_time if old and unchanged else (now or now_rfc3339()),
    )
    if old is None:
        return [*conditions, new]
    return [new if c.type == type else c for c in conditions]


WorkloadPhase = Literal["Pending", "Running", "Failed", "Terminating", "Stopped"]


class WorkloadStatus(ApiModel):
    """The flat status every workload kind shares, on Kubernetes and on the local platform."""

    phase: WorkloadPhase | None = None
    """Pending, Running, Failed, Terminating or Stopped (replicas 0)."""
    message: str | None = None
    """Why the workload is in this phase, for people."""
    url: str | None = None
    """Where clients reach the workload; set only while it is Running."""
    ready_replicas: int | None = Field(default=None, ge=0)
    """Replicas that pass their readiness check."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation this status describes."""
    conditions: list[Condition] = Field(default_factory=list)
    """Conditions, among them Ready."""


class ProxyWorkloadStatus(WorkloadStatus):
    """The flat status of MCPServer and MCPRemoteProxy, plus ToolHive's hashes of the configuration
    objects the workload references (each the object's own `status.configHash`; unset without the
    reference): equal hashes mean the workload runs with that version."""

    tool_config_hash: str | None = None
    """Hash of the MCPToolConfig named by toolConfigRef."""
    external_auth_config_hash: str | None = None
    """Hash of the MCPExternalAuthConfig named by externalAuthConfigRef."""
    auth_server_config_hash: str | None = None
    """Hash of the MCPExternalAuthConfig named by authServerRef (the embedded authorization server)."""
    oidc_config_hash: str | None = None
    """Hash of the MCPOIDCConfig named by oidcConfigRef."""
    authz_config_hash: str | None = None
    """Hash of the MCPAuthzConfig named by authzConfigRef."""
    telemetry_config_hash: str | None = None
    """Hash of the MCPTelemetryConfig named by telemetryConfigRef."""
    webhook_config_hash: str | None = None
    """Hash of the MCPWebhookConfig named by webhookConfigRef."""


class WorkloadReference(ApiModel):
    """A workload that references a configuration object."""

    kind: Literal["MCPServer", "VirtualMCPServer", "MCPRemoteProxy"]
    """Kind of the referencing workload."""
    name: str = Field(min_length=1)
    """Name of the referencing workload."""


class ConfigStatus(ApiModel):
    """Status of a configuration kind (MCPToolConfig, MCPExternalAuthConfig)."""

    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation this status describes."""
    config_hash: str | None = None
    """sha256 of the validated spec; workloads that use it roll when it changes."""
    referencing_workloads: list[WorkloadReference] = Field(default_factory=list)
    """Workloads that reference this configuration."""
    conditions: list[Condition] = Field(default_factory=list)
    """Conditions, among them Valid."""


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0


WORKLOAD_COLUMNS: tuple[PrinterColumn, ...] = (
    PrinterColumn("Status", ".status.phase", description="Phase of the workload"),
    PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status', description="Ready condition"),
    PrinterColumn("Replicas", ".status.readyReplicas", "integer", "Ready replicas"),
    PrinterColumn("URL", ".status.url", description="Where clients reach it"),
    PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
)


def config_columns(*leading: PrinterColumn) -> tuple[PrinterColumn, ...]:
    """The columns of a configuration kind: its own first, then Valid, References and Age."""
    return (
        *leading,
        PrinterColumn("Valid", '.status.conditions[?(@.type=="Valid")].status'),
        PrinterColumn("References", ".status.referencingWorkloads[*].name"),
        PrinterColumn("Age", ".metadata.creationTimestamp", "date"),
    )


@dataclass(frozen=True)
class KindInfo:
    """How a kind is named and shown by the API server."""

    kind: str
    plural: str
    short_names: tuple[str, ...]
    columns: tuple[PrinterColumn, ...] = WORKLOAD_COLUMNS
    workload: bool = True
    categories: tuple[str, ...] = field(default=(CATEGORY,))

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"
