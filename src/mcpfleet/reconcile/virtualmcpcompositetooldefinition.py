"""Reconcile rules of VirtualMCPCompositeToolDefinition: status and the gateways' `compositeToolRefs`.

The definition's spec is an inline composite tool, validated by the same model (steps, DAG, elicitation
steps), so Valid means the gateway can run it. `resolve` gives a VirtualMCPServer's referenced tools,
which the renderer appends to its inline `compositeTools`; a name used twice is refused naming the
reference. Composite tools are re-applied live by the gateway, so an edit needs no restart.
"""

from __future__ import annotations

from typing import Literal

from mcpfleet.api.meta import ConfigStatus, WorkloadReference
from mcpfleet.api.resource import Resource
from mcpfleet.api.virtualmcpcompositetooldefinition import CompositeToolDefinitionStatus
from mcpfleet.api.virtualmcpserver import CompositeTool, VirtualMCPServer
from mcpfleet.reconcile import configkinds
from mcpfleet.reconcile.model import World


class CompositeRefError(LookupError):
    """A `compositeToolRefs` entry that cannot be used; the message names the field."""


def referencing_workloads(name: str, world: World) -> list[WorkloadReference]:
    """VirtualMCPServers whose `spec.config.compositeToolRefs` name it."""
    return configkinds.referencing_by_marks("VirtualMCPCompositeToolDefinition", name, world)


_config_status = configkinds.status_rule(referencing_workloads)


def status(
    previous: ConfigStatus, obj: Resource, world: World, *, deleting: bool, now: str | None = None
) -> CompositeToolDefinitionStatus:
    """Valid, configHash, referencingWorkloads, DeletionBlocked (`configkinds.config_status`), and
    ToolHive's fields mirrored from them (`with_toolhive_fields`)."""
    return with_toolhive_fields(_config_status(previous, obj, world, deleting=deleting, now=now))


def with_toolhive_fields(status: ConfigStatus) -> CompositeToolDefinitionStatus:
    """`status` with validationStatus / validationErrors (from the Valid condition) and
    referencingVirtualServers (from referencingWorkloads)."""
    valid = next((c for c in status.conditions if c.type == configkinds.CONDITION_VALID), None)
    if valid is None:
        state: Literal["Valid", "Invalid", "Unknown"] = "Unknown"
    else:
        state = "Valid" if valid.status == "True" else "Invalid" if valid.status == "False" else "Unknown"
    fields = {k: v for k, v in status.__dict__.items() if k in ConfigStatus.model_fields}
    return CompositeToolDefinitionStatus(
        **fields,
        validation_status=state,
        validation_errors=[valid.message]
        if state == "Invalid" and valid is not None and valid.message
        else [],
        referencing_virtual_servers=sorted(
            {r.name for r in status.referencing_workloads if r.kind == "VirtualMCPServer"}
        ),
    )


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
