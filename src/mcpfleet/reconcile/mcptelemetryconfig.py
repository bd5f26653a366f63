"""Reconcile rules of MCPTelemetryConfig: status (Valid, configHash, referencing workloads) and `resolve`.

`resolve` turns a workload's `telemetryConfigRef` (name + `serviceName`) into the OpenTelemetry
environment of its data-plane process (the services read the standard `OTEL_*` variables, see
`mcpfleet.telemetry`): the endpoint (`host:port` gets http:// when `insecure`, else https://), the
service name, resource attributes, the sampler, plaintext headers, and `sensitiveHeaders` as
secretKeyRef env named by `MCPFLEET_OTLP_SECRET_HEADERS` (never a value in the pod spec or a
ConfigMap). The environment is part of the pod template, so an edit rolls the workloads using it.
A CA bundle is mounted from its ConfigMap and named by `OTEL_EXPORTER_OTLP_CERTIFICATE` (Kubernetes).
Prometheus: the gateway and the registry always serve `/metrics`, so `prometheus.enabled` has
nothing more to turn on.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from mcpfleet.api.inlinetelemetry import InlineTelemetry
from mcpfleet.api.meta import ConfigMapKeyRef, SecretKeyRef, WorkloadReference
from mcpfleet.reconcile import configkinds
from mcpfleet.reconcile.model import (
    KUBERNETES_CONFIGMAP_DIR,
    ConfigMapFile,
    Platform,
    SecretEnv,
    WorkloadPlan,
    World,
)
from mcpfleet.telemetry import SECRET_HEADERS_ENV

CA_FILE = "otlp-ca.crt"


@dataclass(frozen=True)
class TelemetryPlan:
    """The environment a workload gets from its MCPTelemetryConfig."""

    env: tuple[tuple[str, str], ...] = ()
    secret_env: tuple[SecretEnv, ...] = ()
    config_map_files: tuple[ConfigMapFile, ...] = ()
    problems: tuple[str, ...] = ()


def referencing_workloads(name: str, world: World) -> list[WorkloadReference]:
    """Servers, remote proxies and gateways whose `spec.telemetryConfigRef` names it."""
    return configkinds.referencing_by_marks("MCPTelemetryConfig", name, world)


status = configkinds.status_rule(referencing_workloads)
"""Valid, configHash, referencingWorkloads, DeletionBlocked (`configkinds.config_status`)."""


def endpoint_url(endpoint: str, insecure: bool) -> str:
    """An OTLP/HTTP base URL from ToolHive's `host:port` or URL form."""
    if endpoint.startswith(("http://", "https://")):
        return endpoint
    return f"{'http' if insecure else 'https'}://{endpoint}"


def resolve(
    ref: Any, world: World, platform: Platform, *, kind: str, name: str, where: str = "spec"
) -> TelemetryPlan:
    """The telemetry environment of workload `kind`/`name` whose `telemetryConfigRef` is `ref`."""
    field = f"{where}.telemetryConfigRef"
    found = world.telemetry_configs.get(ref.name)
    if found is None:
        return TelemetryPlan(problems=(f"{field}: MCPTelemetryConfig {ref.name} not found",))
    otel = found.spec.open_telemetry
    if otel is None or not otel.enabled or not otel.endpoint:
        return TelemetryPlan(env=(("OTEL_SDK_DISABLED", "true"),))
    if otel.ca_bundle_ref is not None and platform != "kubernetes":
        return TelemetryPlan(
            problems=(
                f"{field}: MCPTelemetryConfig {found.name} openTelemetry.caBundleRef needs Kubernetes "
                "(the local platform has no ConfigMaps)",
            )
        )
    attributes = {
        "k8s.namespace.name": world.namespace,
        "mcpfleet.kind": kind,
        "mcpfleet.name": name,
        **otel.resource_attributes,
    }
    env: list[tuple[str, str]] = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint_url(otel.endpoint, otel.insecure)),
        ("OTEL_SERVICE_NAME", getattr(ref, "service_name", None) or name),
        ("OTEL_RESOURCE_ATTRIBUTES", ",".join(f"{k}={v}" for k, v in attributes.items())),
    ]
    if otel.tracing.enabled:
        env += [
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", otel.tracing.sampling_rate),
        ]
    else:
        env.append(("OTEL_TRACES_EXPORTER", "none"))
    if otel.headers:
        env.append(
            ("OTEL_EXPORTER_OTLP_HEADERS", ",".join(f"{k}={v}" for k, v in sorted(otel.headers.items())))
        )
    secrets: list[SecretEnv] = []
    for index, header in enumerate(otel.sensitive_headers):
        ref_ = header.secret_key_ref
        secrets.append(SecretEnv(f"MCPFLEET_OTLP_HEADER_{index}", SecretKeyRef(name=ref_.name, key=ref_.key)))
    if secrets:
        named = ",".join(
            f"{h.name}={s.env_name}" for h, s in zip(otel.sensitive_headers, secrets, strict=True)
        )
        env.append((SECRET_HEADERS_ENV, named))
    files: tuple[ConfigMapFile, ...] = ()
    ca = otel.ca_bundle_ref.config_map_ref if otel.ca_bundle_ref else None
    if ca is not None:
        files = (ConfigMapFile(CA_FILE, ConfigMapKeyRef(name=ca.name or found.name, key=ca.key)),)
        env.append(("OTEL_EXPORTER_OTLP_CERTIFICATE", f"{KUBERNETES_CONFIGMAP_DIR}/{CA_FILE}"))
    return TelemetryPlan(env=tuple(env), secret_env=tuple(secrets), config_map_files=files)


def inline_env(
    telemetry: InlineTelemetry, world: World, *, kind: str, name: str
) -> tuple[tuple[str, str], ...]:
    """The environment of ToolHive's inline (deprecated) `config.telemetry`, as `resolve` makes it."""
    if not telemetry.endpoint or not (telemetry.tracing_enabled or telemetry.metrics_enabled):
        return (("OTEL_SDK_DISABLED", "true"),)
    attributes = {
        "k8s.namespace.name": world.namespace,
        "mcpfleet.kind": kind,
        "mcpfleet.name": name,
        **({"service.version": telemetry.service_version} if telemetry.service_version else {}),
        **(telemetry.custom_attributes or {}),
    }
    env: list[tuple[str, str]] = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint_url(telemetry.endpoint, telemetry.insecure)),
        ("OTEL_SERVICE_NAME", telemetry.service_name or name),
        ("OTEL_RESOURCE_ATTRIBUTES", ",".join(f"{k}={v}" for k, v in attributes.items())),
    ]
    if telemetry.tracing_enabled:
        env += [
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", telemetry.sampling_rate),
        ]
    else:
        env.append(("OTEL_TRACES_EXPORTER", "none"))
    if telemetry.headers:
        headers = ",".join(f"{k}={v}" for k, v in sorted(telemetry.headers.items()))
        env.append(("OTEL_EXPORTER_OTLP_HEADERS", headers))
    if telemetry.ca_cert_path:
        env.append(("OTEL_EXPORTER_OTLP_CERTIFICATE", telemetry.ca_cert_path))
    return tuple(env)


def applied_inline(
    plan: WorkloadPlan, telemetry: InlineTelemetry | None, world: World, *, target: str
) -> WorkloadPlan:
    """`plan` with the inline telemetry's environment on container `target` (nothing when unset)."""
    if telemetry is None:
        return plan
    env = inline_env(telemetry, world, kind=plan.kind, name=plan.name)
    names = {name for name, _ in env}
    containers = tuple(
        dataclasses.replace(c, env=(*(kv for kv in c.env if kv[0] not in names), *env))
        if c.name == target
        else c
        for c in plan.containers
    )
    return dataclasses.replace(plan, containers=containers)


def applied(plan: WorkloadPlan, ref: Any, world: World, *, target: str) -> WorkloadPlan:
    """`plan` with the telemetry of its `telemetryConfigRef` `ref` on container `target`.

    `target` is the data-plane process (the proxy, the gateway); a server run directly without one is
    its own target, and reads the standard `OTEL_*` variables if it has an OpenTelemetry SDK. The
    variables replace the platform's own tracing env of the same name. A missing MCPTelemetryConfig
    is a problem naming the field; the workload runs on without it (telemetry guards nothing).
    """
    if ref is None:
        return plan
    telemetry = resolve(ref, world, world.platform, kind=plan.kind, name=plan.name)
    if telemetry.problems:
        return dataclasses.replace(plan, problems=(*plan.problems, *telemetry.problems))
    names = {name for name, _ in telemetry.env}
    containers = tuple(
        dataclasses.replace(
            c,
            env=(*(kv for kv in c.env if kv[0] not in names), *telemetry.env),
            secret_env=(*c.secret_env, *telemetry.secret_env),
        )
        if c.name == target
        else c
        for c in plan.containers
    )
    files = (
        plan.config_map_files + telemetry.config_map_files
        if plan.serving_container
        else plan.config_map_files
    )
    return dataclasses.replace(plan, containers=containers, config_map_files=files)


config_hash = configkinds.config_hash
