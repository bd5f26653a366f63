"""Helpers shared by the per-kind reconcile rules: labels, package commands, env, conditions, hashes.

Everything here is pure: no I/O, no clock except through the callers' `now`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mcpfleet.api.common import EnvVar, ResourceRequirements, SecretRef
from mcpfleet.api.kinds import DESCRIPTORS
from mcpfleet.api.meta import (
    LABEL_COMPONENT,
    LABEL_INSTANCE,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    ConditionStatus,
)
from mcpfleet.api.ratelimit import REDIS_PASSWORD_ENV, SessionStorage
from mcpfleet.reconcile.model import SecretEnv, World

MANAGED_BY = "mcpfleet"
LABEL_KIND = "mcpfleet.dev/kind"
LABEL_GROUP = "mcpfleet.dev/group"

CONDITION_GROUP_REF = "GroupRefValidated"
CONDITION_REPLICAS_CAPPED = "ReplicasCapped"

LOCAL_OCI_PROBLEM = (
    "container images need Kubernetes or a container runtime on this machine (podman or docker, none"
    " found); use uvx:// or npx://"
)


def labels(kind: str, name: str, component: str) -> dict[str, str]:
    """Labels on every child of an object: who manages it and which object it belongs to."""
    return {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_NAME: component,
        LABEL_INSTANCE: name,
        LABEL_COMPONENT: component,
        LABEL_KIND: kind.lower(),
    }


def canonical_json(value: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces): the input of every content hash."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def sha256_of(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def package_command(image: str, args: list[str] | None) -> tuple[str, ...]:
    """`uvx://PKG[@V]` -> `uvx -- PKG@V ARGS`; `npx://PKG[@V]` -> `npx -y -- PKG@V ARGS`: `--` ends the
    launcher's options, so no package name is read as one (the model refuses a leading `-` too)."""
    scheme, _, package = image.partition("://")
    rest = tuple(args or ())
    if scheme == "uvx":
        return ("uvx", "--", package, *rest)
    if scheme == "npx":
        return ("npx", "-y", "--", package, *rest)
    raise ValueError(f"image: {image!r} is not a uvx:// or npx:// package")


def plain_env(env: list[EnvVar] | None) -> tuple[tuple[str, str], ...]:
    return tuple((e.name, e.value) for e in env or ())


def secret_env(secrets: list[SecretRef] | None) -> tuple[SecretEnv, ...]:
    from mcpfleet.api.meta import SecretKeyRef

    return tuple(
        SecretEnv(env_name=s.target_env_name or s.key, secret=SecretKeyRef(name=s.name, key=s.key))
        for s in secrets or ()
    )


def redis_password_env(storage: SessionStorage | None) -> tuple[SecretEnv, ...]:
    """The Redis password of a `sessionStorage`, as secretKeyRef env (never in a config file)."""
    if storage is None or storage.provider != "redis" or storage.password_ref is None:
        return ()
    return (SecretEnv(env_name=REDIS_PASSWORD_ENV, secret=storage.password_ref),)


def resources_dict(resources: ResourceRequirements | None) -> dict[str, dict[str, str]] | None:
    if resources is None:
        return None
    dumped = resources.dump()
    return {k: v for k, v in dumped.items() if v} or None


def group_condition(group_ref: str | None, world: World) -> tuple[tuple[str, ConditionStatus, str, str], ...]:
    """GroupRefValidated for a member: True while its group exists, False once it is gone."""
    if group_ref is None:
        return ()
    if group_ref in world.groups:
        return ((CONDITION_GROUP_REF, "True", "GroupFound", f"MCPGroup {group_ref} exists"),)
    return ((CONDITION_GROUP_REF, "False", "GroupNotFound", f"MCPGroup {group_ref} not found"),)


CHILD_PREFIX = {d.kind: d.child_prefix for d in DESCRIPTORS if d.child_prefix is not None}
"""Children are named PREFIX-NAME so a server and a gateway of the same name never collide."""
DNS_LABEL_MAX = 63


def child_name(kind: str, name: str) -> str:
    """Name of the Deployment, Service, ServiceAccount and Role of a workload object on Kubernetes."""
    return f"{CHILD_PREFIX[kind]}-{name}"


def child_name_problem(kind: str, name: str) -> tuple[str, ...]:
    """A Service name is a DNS label: PREFIX-NAME must fit in 63 characters."""
    child = child_name(kind, name)
    if len(child) > DNS_LABEL_MAX:
        limit = DNS_LABEL_MAX - len(CHILD_PREFIX[kind]) - 1
        return (
            f"metadata.name: at most {limit} characters for a {kind} on Kubernetes ({child} is too long)",
        )
    return ()


def service_hosts(name: str, namespace: str, port: int) -> tuple[str, ...]:
    """Host header values a Service `name` is reached under (for the proxy's DNS-rebinding protection)."""
    return (
        f"{name}:{port}",
        f"{name}.{namespace}:{port}",
        f"{name}.{namespace}.svc:{port}",
        f"{name}.{namespace}.svc.cluster.local:{port}",
    )


def service_url(name: str, namespace: str, port: int, path: str) -> str:
    """The in-cluster URL of a Service (what `status.url` shows on Kubernetes)."""
    return f"http://{name}.{namespace}.svc.cluster.local:{port}{path}"


def serve_command(service: str, config_file: str) -> list[str]:
    """`mcpfleet <service> serve` on its rendered config file, on the port the platform assigns."""
    return ["mcpfleet", service, "serve", "--config", f"{{config_dir}}/{config_file}", "--port", "{port}"]


def tracing_env(world: World, kind: str, name: str) -> tuple[tuple[str, str], ...]:
    """OTLP settings for a data-plane service (vMCP, registry) when the platform traces; else none.

    The resource attributes tell one workload's spans from another's in the collector.
    """
    if not world.otlp_endpoint:
        return ()
    return (
        ("OTEL_EXPORTER_OTLP_ENDPOINT", world.otlp_endpoint),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            f"k8s.namespace.name={world.namespace},mcpfleet.kind={kind},mcpfleet.name={name}",
        ),
    )
