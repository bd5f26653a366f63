"""`mcpfleet.telemetry`: when tracing turns on, which exporters, service name, errors, propagation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from mcpfleet import telemetry
from mcpfleet.telemetry import TracingConfigError, TracingOptions, exporter_names, setup_tracing

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("OTEL_"):
            monkeypatch.delenv(key)


def exporters(provider: TracerProvider) -> list[object]:
    procs = provider._active_span_processor._span_processors  # the SDK keeps no public list
    return [p.span_exporter for p in procs]  # type: ignore[attr-defined]


def test_nothing_configured_means_no_provider() -> None:
    assert exporter_names() == []
    assert setup_tracing("svc") is None
    assert telemetry.tracer_of(None) is None
    telemetry.shutdown(None)


def test_an_otlp_endpoint_alone_turns_otlp_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    provider = setup_tracing("svc")
    assert provider is not None
    try:
        (exp,) = exporters(provider)
        assert isinstance(exp, OTLPSpanExporter)
        assert exp._endpoint == "http://127.0.0.1:4318/v1/traces"
        assert provider.resource.attributes["service.name"] == "svc"
    finally:
        provider.shutdown()


def test_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    opts = TracingOptions(exporter="otlp,console", endpoint="http://collector:4318/", service_name="flag")
    provider = setup_tracing("svc", opts, resource_attributes={"mcpfleet.vmcp.name": "gw"})
    assert provider is not None
    try:
        kinds = exporters(provider)
        assert isinstance(kinds[0], OTLPSpanExporter) and isinstance(kinds[1], ConsoleSpanExporter)
        assert kinds[0]._endpoint == "http://collector:4318/v1/traces"
        attrs = provider.resource.attributes
        assert attrs["service.name"] == "flag" and attrs["mcpfleet.vmcp.name"] == "gw"
    finally:
        provider.shutdown()


def test_service_name_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs,team=x")
    p1 = setup_tracing("svc")
    assert p1 is not None and p1.resource.attributes["service.name"] == "from-attrs"
    assert p1.resource.attributes["team"] == "x"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    p2 = setup_tracing("svc")
    assert p2 is not None and p2.resource.attributes["service.name"] == "from-env"
    for p in (p1, p2):
        p.shutdown()


@pytest.mark.parametrize(
    ("env", "value"),
    [("OTEL_TRACES_EXPORTER", "none"), ("OTEL_SDK_DISABLED", "true")],
)
def test_off_switches(monkeypatch: pytest.MonkeyPatch, env: str, value: str) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv(env, value)
    assert setup_tracing("svc") is None


def test_unsupported_settings_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(TracingConfigError, match="'jaeger'"):
        setup_tracing("svc", TracingOptions(exporter="jaeger"))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(TracingConfigError, match="http/protobuf"):
        setup_tracing("svc", TracingOptions(exporter="otlp"))


def test_inject_and_extract_round_trip(tracing: tuple[Tracer, InMemorySpanExporter]) -> None:
    tracer, exporter = tracing
    headers: dict[str, str] = {}
    with tracer.start_as_current_span("out") as span:
        telemetry.inject(headers)
    ctx = span.get_span_context()
    assert headers["traceparent"].startswith(f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-")
    with tracer.start_as_current_span("in", context=telemetry.extract(headers)):
        pass
    inner = exporter.get_finished_spans()[-1]
    assert inner.parent is not None and inner.parent.span_id == ctx.span_id
    empty: dict[str, str] = {}
    telemetry.inject(empty)  # no current span: nothing to propagate
    assert "traceparent" not in empty


def test_vmcp_serve_refuses_a_bad_exporter(tmp_path: Path) -> None:
    cfg = tmp_path / "vmcp.yaml"
    cfg.write_text(json.dumps({"name": "t", "backends": [{"name": "a", "url": "http://127.0.0.1:1/mcp"}]}))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcpfleet.cli.main",
            "vmcp",
            "serve",
            "--config",
            str(cfg),
            "--trace-exporter",
            "zipkin",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert "zipkin" in result.stderr
