"""The one per-kind table of reconcile rules: which rule plans a kind and which computes its status.

Both platforms dispatch through it (the operator's controller and the local runner), so they cannot
disagree on which rule a kind follows, and a new kind is one row here plus its `reconcile/<kind>.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic.alias_generators import to_snake

from mcpfleet.api.meta import ApiModel, ConfigStatus, ProxyWorkloadStatus, WorkloadStatus
from mcpfleet.reconcile import (
    confighashes,
    configkinds,
    embeddingserver,
    mcpauthzconfig,
    mcpexternalauthconfig,
    mcpoidcconfig,
    mcpregistry,
    mcpremoteproxy,
    mcpserver,
    mcptelemetryconfig,
    mcptoolconfig,
    mcpwebhookconfig,
    virtualmcpcompositetooldefinition,
    virtualmcpserver,
)
from mcpfleet.reconcile.model import WorkloadObservation, WorkloadPlan, World
from mcpfleet.reconcile.status import workload_status

StatusRule = Callable[[Any, Any, WorkloadPlan, WorkloadObservation | None, World, str | None], ApiModel]
"""(previous status, object, plan, observation, world, now) -> the new status."""


def _flat(prev: Any, obj: Any, plan: WorkloadPlan, seen: Any, world: World, now: str | None) -> ApiModel:
    """The shared flat workload status (MCPServer, MCPRemoteProxy) and the referenced configurations'
    hashes (`confighashes`)."""
    flat = workload_status(prev, plan, seen, obj.generation, now)
    fields = {name: getattr(flat, name) for name in WorkloadStatus.model_fields}
    return ProxyWorkloadStatus(**fields, **confighashes.proxy_hashes(obj.spec, world))


@dataclass(frozen=True)
class WorkloadRules:
    """The rules of a kind that runs something."""

    plan: Callable[[Any, World], WorkloadPlan]
    status: StatusRule


WORKLOADS: dict[str, WorkloadRules] = {
    "MCPServer": WorkloadRules(mcpserver.plan, _flat),
    "MCPRemoteProxy": WorkloadRules(mcpremoteproxy.plan, _flat),
    "VirtualMCPServer": WorkloadRules(
        virtualmcpserver.plan,
        lambda prev, obj, plan, seen, world, now: virtualmcpserver.status(prev, obj, plan, seen, world, now),
    ),
    "MCPRegistry": WorkloadRules(
        mcpregistry.plan,
        lambda prev, obj, plan, seen, world, now: mcpregistry.status(prev, obj, plan, seen, now),
    ),
    "EmbeddingServer": WorkloadRules(
        embeddingserver.plan,
        lambda prev, obj, plan, seen, world, now: embeddingserver.status(prev, obj, plan, seen, now),
    ),
}
"""Workload kinds and their rules."""

CONFIGS: dict[str, Callable[..., ConfigStatus]] = {
    "MCPToolConfig": mcptoolconfig.status,
    "MCPExternalAuthConfig": mcpexternalauthconfig.status,
    "MCPOIDCConfig": mcpoidcconfig.status,
    "MCPTelemetryConfig": mcptelemetryconfig.status,
    "MCPAuthzConfig": mcpauthzconfig.status,
    "MCPWebhookConfig": mcpwebhookconfig.status,
    "VirtualMCPCompositeToolDefinition": virtualmcpcompositetooldefinition.status,
}
"""Configuration kinds and their status rule (referencing workloads, hash, deletion guard)."""

MEMBERS = ("MCPServer", "MCPRemoteProxy")
"""Kinds that join an MCPGroup (a VirtualMCPServer's backends) and run something."""

ENTRIES = ("MCPServerEntry",)
"""Kinds that join an MCPGroup without running anything (status rule: `mcpserverentry.status`)."""


def plan(obj: Any, world: World) -> WorkloadPlan:
    """What should run for a workload object."""
    rules = WORKLOADS.get(obj.kind)
    if rules is None:
        raise TypeError(f"{obj.kind} is not a workload kind")
    return rules.plan(obj, world)


def status(
    previous: Any,
    obj: Any,
    plan: WorkloadPlan,
    observation: WorkloadObservation | None,
    world: World,
    now: str | None = None,
) -> ApiModel:
    """The new status of a workload object; equal to `previous` when nothing changed."""
    return WORKLOADS[obj.kind].status(previous, obj, plan, observation, world, now)


def config_status(
    previous: ConfigStatus, obj: Any, world: World, *, deleting: bool, now: str | None = None
) -> ConfigStatus:
    """The new status of a configuration object."""
    return CONFIGS[obj.kind](previous, obj, world, deleting=deleting, now=now)


CONFIG_STATUS_FIELDS: dict[str, Callable[[ConfigStatus], ConfigStatus]] = {
    "VirtualMCPCompositeToolDefinition": virtualmcpcompositetooldefinition.with_toolhive_fields,
}
"""Kinds whose status has fields of their own, derived from the shared configuration status."""


def parse_config_status(raw_status: dict[str, Any]) -> ConfigStatus:
    """The shared part of a configuration object's stored status (a kind's own fields left out; an
    unreadable one is empty: it is recomputed)."""
    try:
        return ConfigStatus.model_validate(
            {k: v for k, v in raw_status.items() if to_snake(k) in ConfigStatus.model_fields}
        )
    except ValueError:
        return ConfigStatus()


def invalid_config_status(
    kind: str, raw_status: dict[str, Any], *, generation: int, message: str, now: str | None = None
) -> ConfigStatus:
    """The status of a configuration object whose spec the models refuse (`raw_status`: what the
    object holds now): Valid=False naming the field, in the kind's own status shape."""
    previous = parse_config_status(raw_status)
    status = configkinds.invalid_config_status(previous, generation=generation, message=message, now=now)
    finish = CONFIG_STATUS_FIELDS.get(kind)
    return finish(status) if finish is not None else status
