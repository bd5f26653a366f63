"""ToolHive's deprecated inline VirtualMCPServer `spec.config.telemetry`: applied to the gateway as the
`OTEL_*` environment an MCPTelemetryConfig gives, warned about, refused together with
`telemetryConfigRef`."""

from __future__ import annotations

from typing import Any

import pytest

from mcpfleet.api.kinds import ManifestError, parse_manifest
from mcpfleet.api.superseded import warnings
from mcpfleet.api.virtualmcpserver import VirtualMCPServer
from mcpfleet.reconcile import virtualmcpserver
from mcpfleet.reconcile.model import World
from mcpfleet.reconcile.virtualmcpserver import CONTAINER


def _gateway(config: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "mcpfleet.dev/v1beta1",
        "kind": "VirtualMCPServer",
        "metadata": {"name": "gw", "namespace": "team"},
        "spec": {
            "groupRef": {"name": "team"},
            "incomingAuth": {"type": "anonymous"},
            "config": config,
            **spec,
        },
    }


def _env(document: dict[str, Any], platform: str = "kubernetes") -> dict[str, str]:
    vmcp = parse_manifest(document)
    assert isinstance(vmcp, VirtualMCPServer)
    plan = virtualmcpserver.plan(vmcp, World(platform=platform, namespace="team"))  # type: ignore[arg-type]
    (container,) = [c for c in plan.containers if c.name == CONTAINER]
    return dict(container.env)


TELEMETRY = {
    "endpoint": "otel-collector:4318",
    "insecure": True,
    "tracingEnabled": True,
    "samplingRate": "0.5",
    "serviceName": "my-vmcp",
    "serviceVersion": "1.2.3",
    "customAttributes": {"team": "platform"},
    "headers": {"x-tenant": "t1"},
    "caCertPath": "/etc/otel/ca.crt",
}


@pytest.mark.parametrize("platform", ["kubernetes", "local"])
def test_inline_telemetry_becomes_the_gateways_otel_environment(platform: str) -> None:
    env = _env(_gateway({"telemetry": TELEMETRY}), platform)
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector:4318"
    assert env["OTEL_SERVICE_NAME"] == "my-vmcp"
    assert env["OTEL_TRACES_SAMPLER_ARG"] == "0.5"
    assert "service.version=1.2.3" in env["OTEL_RESOURCE_ATTRIBUTES"]
    assert "team=platform" in env["OTEL_RESOURCE_ATTRIBUTES"]
    assert env["OTEL_EXPORTER_OTLP_HEADERS"] == "x-tenant=t1"
    assert env["OTEL_EXPORTER_OTLP_CERTIFICATE"] == "/etc/otel/ca.crt"


def test_off_unless_a_signal_is_enabled() -> None:
    env = _env(_gateway({"telemetry": {"endpoint": "otel:4318"}}))
    assert env["OTEL_SDK_DISABLED"] == "true" and "OTEL_EXPORTER_OTLP_ENDPOINT" not in env


def test_warned_and_refused_with_a_ref() -> None:
    document = _gateway({"telemetry": TELEMETRY})
    assert warnings(document, VirtualMCPServer.version_changes, "v1beta1") == [
        "spec.config.telemetry is deprecated: set spec.telemetryConfigRef (an MCPTelemetryConfig) instead"
    ]
    with pytest.raises(ManifestError) as caught:
        parse_manifest(_gateway({"telemetry": TELEMETRY}, telemetryConfigRef={"name": "otel"}))
    assert caught.value.problems[0][0] == "spec.config.telemetry"


@pytest.mark.parametrize(
    ("field", "value"),
    [("samplingRate", "2"), ("caCertPath", "relative/ca.crt"), ("prometheusPort", 0), ("endpoint", "a b")],
)
def test_hostile_values_are_refused_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(_gateway({"telemetry": {**TELEMETRY, field: value}}))
    assert caught.value.problems[0][0] == f"spec.config.telemetry.{field}"
