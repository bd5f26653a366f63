"""The shared reconcile rules as the local platform calls them: one dispatch by kind.

No rule lives here: every decision (what runs, rendered configs, phases) comes from
`mcpfleet.reconcile.<kind>`, exactly as the operator uses them. This module only maps a kind to its
rule and converts statuses between the stored JSON (camelCase, as on Kubernetes) and the models.
"""

from __future__ import annotations

from typing import Any

from mcpfleet.api.mcpexternalauthconfig import MCPExternalAuthConfig
from mcpfleet.api.mcpgroup import MCPGroup, MCPGroupStatus
from mcpfleet.api.mcpregistry import MCPRegistry, MCPRegistryStatus
from mcpfleet.api.mcpremoteproxy import MCPRemoteProxy
from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.mcptoolconfig import MCPToolConfig
from mcpfleet.api.meta import ConfigStatus, WorkloadStatus
from mcpfleet.api.resource import Resource
from mcpfleet.api.virtualmcpserver import VirtualMCPServer, VirtualMCPServerStatus
from mcpfleet.reconcile import (
    mcpexternalauthconfig,
    mcpgroup,
    mcpregistry,
    mcpremoteproxy,
    mcpserver,
    mcptoolconfig,
    virtualmcpserver,
)
from mcpfleet.reconcile.model import WorkloadObservation, WorkloadPlan, World
from mcpfleet.reconcile.status import workload_status


def plan(resource: Resource, world: World) -> WorkloadPlan:
    """What should run for a workload object (MCPServer, MCPRemoteProxy, VirtualMCPServer, MCPRegistry)."""
    if isinstance(resource, MCPServer):
        return mcpserver.plan(resource, world)
    if isinstance(resource, MCPRemoteProxy):
        return mcpremoteproxy.plan(resource, world)
    if isinstance(resource, VirtualMCPServer):
        return virtualmcpserver.plan(resource, world)
    if isinstance(resource, MCPRegistry):
        return mcpregistry.plan(resource, world)
    raise TypeError(f"{resource.kind} is not a workload kind")


def status(
    resource: Resource,
    previous: dict[str, Any],
    plan: WorkloadPlan,
    observation: WorkloadObservation | None,
    world: World,
    gateway_report: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The new status (wire form) of a workload object from the shared status rules."""
    generation = resource.generation
    if isinstance(resource, VirtualMCPServer):
        before = VirtualMCPServerStatus.model_validate(previous or {})
        if gateway_report is not None:
            # What the gateway patches into the status itself on Kubernetes (backend health, counts).
            before = before.model_copy(update=_gateway_fields(gateway_report))
        return virtualmcpserver.status(before, resource, plan, observation, world).dump()
    if isinstance(resource, MCPRegistry):
        registry_before = MCPRegistryStatus.model_validate(previous or {})
        return mcpregistry.status(registry_before, resource, plan, observation).dump()
    workload_before = WorkloadStatus.model_validate(previous or {})
    return workload_status(workload_before, plan, observation, generation).dump()


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


def config_status(
    previous: ConfigStatus, obj: MCPToolConfig | MCPExternalAuthConfig, world: World
) -> ConfigStatus:
    # Locally a removed manifest is simply gone (no finalizer to hold it), so never "deleting".
    if isinstance(obj, MCPToolConfig):
        return mcptoolconfig.status(previous, obj, world, deleting=False)
    return mcpexternalauthconfig.status(previous, obj, world, deleting=False)
