"""MCPTelemetryConfig: OpenTelemetry and Prometheus settings shared by the workloads that reference it.

Referenced by `telemetryConfigRef` (with a per-workload `serviceName`); `reconcile/mcptelemetryconfig.py`
turns it into the `OTEL_*` environment of the workload (header values from Secrets as secretKeyRef env).
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

HEADER_NAME_PATTERN = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"


class SensitiveHeader(ApiModel):
    """An OTLP header whose value comes from a Secret."""

    name: str = Field(min_length=1, max_length=255, pattern=HEADER_NAME_PATTERN)
    """Header name."""
    secret_key_ref: SecretKeyRef
    """Secret key holding the header value."""


class TracingSettings(ApiModel):
    """Trace export."""

    enabled: bool = False
    """Export traces."""
    sampling_rate: str = Field(default="0.05", pattern=r"^(0(\.\d+)?|1(\.0+)?)$", max_length=32)
    """Fraction of traces sampled, 0 to 1 (a string, as ToolHive writes it)."""


class MetricsSettings(ApiModel):
    """Metric export over OTLP."""

    enabled: bool = False
    """Export metrics."""


class OpenTelemetrySettings(RuleModel):
    """Where and what to export over OTLP."""

    rules = (
        Rule(
            cel="!has(self.headers) || !has(self.sensitiveHeaders) || "
            "self.sensitiveHeaders.all(sh, !(sh.name in self.headers))",
            message="a header may not be both in headers and in sensitiveHeaders",
            field_path=".sensitiveHeaders",
            check=lambda s: not ({h.name for h in s.sensitive_headers} & set(s.headers)),
        ),
        Rule(
            cel="!self.enabled || (has(self.endpoint) && size(self.endpoint) > 0)",
            message="endpoint is required when enabled is true",
            field_path=".endpoint",
            check=lambda s: not s.enabled or bool(s.endpoint),
        ),
    )

    enabled: bool = False
    """Turn OTLP export on."""
    endpoint: str | None = Field(default=None, max_length=2048, pattern=r"^[^\s]+$")
    """OTLP/HTTP collector, `host:port` or a URL (http:// is used for `host:port` when `insecure`)."""
    insecure: bool = False
    """Plain HTTP toward the collector."""
    headers: dict[str, str] = Field(default_factory=dict, max_length=50)
    """Non-secret headers sent with every export."""
    sensitive_headers: list[SensitiveHeader] = Field(default_factory=list, max_length=50)
    """Headers whose values come from Secrets."""
    resource_attributes: dict[str, str] = Field(default_factory=dict, max_length=50)
    """Extra OpenTelemetry resource attributes."""
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    """Trace export settings."""
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    """Metric export settings."""
    ca_bundle_ref: CABundleRef | None = None
    """CA certificates for the collector's TLS (Kubernetes only)."""
    use_legacy_attributes: bool = True
    """Also emit ToolHive's legacy span attribute names (accepted; mcpfleet emits its own names)."""


class PrometheusSettings(ApiModel):
    """A Prometheus scrape endpoint."""

    enabled: bool = False
    """Serve /metrics for Prometheus."""


class MCPTelemetryConfigSpec(ApiModel):
    """Observability settings."""

    open_telemetry: OpenTelemetrySettings | None = None
    """OTLP export."""
    prometheus: PrometheusSettings | None = None
    """Prometheus scraping."""


class MCPTelemetryConfig(Resource):
    """Shared OpenTelemetry / Prometheus settings."""

    info: ClassVar[KindInfo] = KindInfo(
        "MCPTelemetryConfig",
        "mcptelemetryconfigs",
        ("mcpotel",),
        columns=config_columns(
            PrinterColumn("Endpoint", ".spec.openTelemetry.endpoint"),
            PrinterColumn("Tracing", ".spec.openTelemetry.tracing.enabled", "boolean"),
            PrinterColumn("Metrics", ".spec.openTelemetry.metrics.enabled", "boolean"),
        ),
        workload=False,
    )
    kind: Literal["MCPTelemetryConfig"] = "MCPTelemetryConfig"
    spec: MCPTelemetryConfigSpec = Field(default_factory=MCPTelemetryConfigSpec)
    status: ConfigStatus = Field(default_factory=ConfigStatus)
