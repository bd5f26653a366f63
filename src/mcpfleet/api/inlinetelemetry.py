"""ToolHive's inline VirtualMCPServer `spec.config.telemetry` (the vMCP's standalone shape).

ToolHive deprecates it on Kubernetes in favour of `spec.telemetryConfigRef` (an MCPTelemetryConfig),
and so does mcpfleet: it is accepted, applied to the gateway when no `telemetryConfigRef` is set (the
same `OTEL_*` environment an MCPTelemetryConfig gives, `mcpfleet.reconcile.mcptelemetryconfig`), warned
about, and refused together with `telemetryConfigRef`.
"""

from __future__ import annotations

from pydantic import Field

from mcpfleet.api.meta import ApiModel

SAMPLING_RATE = r"^(0(\.\d+)?|1(\.0+)?)$"


class InlineTelemetry(ApiModel):
    """OpenTelemetry settings of the gateway, inline (deprecated: use spec.telemetryConfigRef)."""

    endpoint: str | None = Field(default=None, max_length=2048, pattern=r"^[^\s]+$")
    """OTLP/HTTP endpoint: a URL, or host:port (https, or http with insecure)."""
    insecure: bool = False
    """host:port endpoints are reached over plain HTTP."""
    headers: dict[str, str] | None = Field(default=None, max_length=50)
    """Headers sent to the endpoint (plain values: use an MCPTelemetryConfig's sensitiveHeaders for
    credentials)."""
    ca_cert_path: str | None = Field(default=None, max_length=4096, pattern=r"^/[^\s]*$")
    """A CA bundle file the exporter trusts (a path inside the gateway's container, e.g. mounted
    through podTemplateSpec; locally a file of this machine)."""
    tracing_enabled: bool = False
    """Export traces (sampled at samplingRate); off: no trace is exported."""
    sampling_rate: str = Field(default="0.05", pattern=SAMPLING_RATE, max_length=32)
    """Trace sampling ratio, 0.0-1.0, as a string."""
    metrics_enabled: bool = False
    """OTLP metrics, as an MCPTelemetryConfig's metrics.enabled."""
    service_name: str | None = Field(default=None, max_length=253)
    """Service name of the telemetry (default: the gateway's name)."""
    service_version: str | None = Field(default=None, max_length=128)
    """service.version resource attribute."""
    custom_attributes: dict[str, str] | None = Field(default=None, max_length=50)
    """Resource attributes added to every signal."""
    environment_variables: list[str] | None = Field(default=None, max_length=50)
    """ToolHive's environment variables copied into spans: no effect here (set customAttributes)."""
    enable_prometheus_metrics_path: bool = False
    """No effect: the gateway always serves Prometheus /metrics on its port."""
    metrics_on_transport_port: bool | None = None
    """No effect: /metrics is on the gateway's port already."""
    prometheus_port: int | None = Field(default=None, ge=1, le=65535)
    """No effect: the gateway has no separate diagnostics port."""
    use_legacy_attributes: bool = True
    """As an MCPTelemetryConfig's useLegacyAttributes."""
