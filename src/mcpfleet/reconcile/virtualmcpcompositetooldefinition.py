"""Reconcile rules of VirtualMCPCompositeToolDefinition: status and the gateways' `compositeToolRefs`.

The definition's spec is an inline composite tool, validated by the same model (steps, DAG, elicitation
steps), so Valid means the gateway can run it. `resolve` gives a VirtualMCPServer's referenced tools,
which the renderer appends to its inline `compositeTools`; a name used twice is refused naming the
reference. Composite tools are re-applied live by the gateway, so an edit needs no restart.
"""

from __future__ import annotations

from mcpfleet.api.meta import WorkloadReference
from mcpfleet.api.virtualmcpserver import CompositeTool, VirtualMCPServer
from mcpfleet.reconcile import configkinds
from mcpfleet.reconcile.model import World

GATEWAY_PATHS: tuple[configkinds.RefPath, ...] = (("config", "compositeToolRefs", "*"),)


class CompositeRefError(LookupError):
    """A `compositeToolRefs` entry that cannot be used; the message names the field."""


def referencing_workloads(name: str, world: World) -> list[WorkloadReference]:
    """VirtualMCPServers whose `spec.config.compositeToolRefs` name it."""
    return configkinds.referencing_by_paths(name, world, (), GATEWAY_PATHS)


status = configkinds.status_rule(referencing_workloads)
"""Valid, configHash, referencingWorkloads, DeletionBlocked (`configkinds.config_status`)."""


def resolve(vmcp: VirtualMCPServer, world: World) -> list[CompositeTool]:
    """The inline composite tools followed by the referenced ones, names unique."""
    config = vmcp.spec.config
    tools = list(config.composite_tools)
    names = {t.name for t in tools}
    for index, ref in enumerate(config.composite_tool_refs):
        field = f"spec.config.compositeToolRefs[{index}]"
        found = world.composite_tool_definitions.get(ref.name)
        if found is None:
            raise CompositeRefError(f"{field}: VirtualMCPCompositeToolDefinition {ref.name} not found")
        if found.spec.name in names:
            raise CompositeRefError(f"{field}: a composite tool named {found.spec.name!r} is already defined")
        names.add(found.spec.name)
        tools.append(found.spec)
    return tools


config_hash = configkinds.config_hash
