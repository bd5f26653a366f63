"""The shared reconcile rules as the local platform calls them (the table: `reconcile/kinds.py`).

No rule lives here: every decision (what runs, rendered configs, phases) comes from
`mcpfleet.reconcile.<kind>`, through the same table as the operator. This module only converts
statuses between the stored JSON (camelCase, as on Kubernetes) and the models.
"""

from __future__ import annotations

from typing import Any

from mcpfleet.api.kinds import Role, descriptor
from mcpfleet.api.mcpgroup import MCPGroup, MCPGroupStatus
from mcpfleet.api.mcpserverentry import MCPServerEntry, MCPServerEntryStatus
from mcpfleet.api.meta import ConfigStatus
from mcpfleet.api.resource import Resource
from mcpfleet.api.virtualmcpserver import VirtualMCPServer, VirtualMCPServerStatus
from mcpfleet.reconcile import kinds, mcpgroup, mcpserverentry
from mcpfleet.reconcile.model import WorkloadObservation, WorkloadPlan, World


def plan(resource: Resource, world: World) -> WorkloadPlan:
    """What should run for a workload object (MCPServer, MCPRemoteProxy, VirtualMCPServer, MCPRegistry)."""
    return kinds.plan(resource, world)


def status(
    resource: Resource,
    previous: dict[str, Any],
    plan: WorkloadPlan,
    observation: WorkloadObservation | None,
    world: World,
    gateway_report: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The new status (wire form) of a workload object from the shared status rules."""
    before = type(resource.status).model_validate(previous or {})  # type: ignore[attr-defined]
    if isinstance(resource, VirtualMCPServer) and gateway_report is not None:
        # What the gateway patches into the status itself on Kubernetes (backend health, counts).
        before = before.model_copy(update=_gateway_fields(gateway_report))
    return kinds.status(before, resource, plan, observation, world).dump()


def _gateway_fields(report: dict[str, Any]) -> dict[str, Any]:
    from mcpfleet.vmcp.status import to_resource_status

    fields = VirtualMCPServerStatus.model_validate(to_resource_status(report))
    return {
        "discovered_backends": fields.discovered_backends,
        "backend_count": fields.backend_count,
        "tool_count": fields.tool_count,
        "resource_count": fields.resource_count,
        "prompt_count": fields.prompt_count,
    }


def group_status(previous: MCPGroupStatus, group: MCPGroup, world: World) -> MCPGroupStatus:
    return mcpgroup.status(previous, group, world)


def config_status(previous: ConfigStatus, obj: Resource, world: World) -> ConfigStatus:
    # Locally a removed manifest is simply gone (no finalizer to hold it), so never "deleting".
    return kinds.config_status(previous, obj, world, deleting=False)


def other_status(resource: Resource, previous: dict[str, Any], world: World) -> dict[str, Any] | None:
    """The new status (wire form) of an object that runs nothing (a group, a configuration, an
    entry), by its kind's role; None for a workload (`status`)."""
    role = descriptor(resource.kind).role
    if role is Role.GROUP and isinstance(resource, MCPGroup):
        return group_status(MCPGroupStatus.model_validate(previous), resource, world).dump()
    if role is Role.CONFIG:
        return config_status(kinds.parse_config_status(previous), resource, world).dump()
    if role is Role.ENTRY and isinstance(resource, MCPServerEntry):
        return mcpserverentry.status(MCPServerEntryStatus.model_validate(previous), resource, world).dump()
    return None
