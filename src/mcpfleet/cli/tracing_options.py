"""The tracing flags shared by the `serve` commands of the data-plane services (vMCP, registry)."""

from __future__ import annotations

from mcpfleet.cli.options import Opt

TRACE_EXPORTER = Opt(
    None,
    "--trace-exporter",
    help="Trace exporters: otlp, console or none (comma-separated). Default: $OTEL_TRACES_EXPORTER; "
    "otlp when an OTLP endpoint is set; else tracing is off. See docs/observability.md.",
)
OTLP_ENDPOINT = Opt(
    None,
    "--otlp-endpoint",
    help="OTLP/HTTP base URL of the collector, e.g. http://collector:4318 "
    "(default: $OTEL_EXPORTER_OTLP_ENDPOINT).",
)
