"""VirtualMCPCompositeToolDefinition: a composite tool defined once, used by the VirtualMCPServers that
name it in `spec.config.compositeToolRefs`.

The spec is exactly an inline composite tool (`virtualmcpserver.CompositeTool`: name, parameters,
steps incl. elicitation steps, output, annotations), so the gateway runs a referenced tool as it runs
an inline one; the status says whether it is valid and which gateways use it (in the conditions and
`referencingWorkloads`, and in ToolHive's `validationStatus` / `validationErrors` /
`referencingVirtualServers`).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from mcpfleet.api.meta import ConfigStatus, KindInfo, PrinterColumn, config_columns
from mcpfleet.api.resource import Resource
from mcpfleet.api.virtualmcpserver import CompositeTool


class CompositeToolDefinitionStatus(ConfigStatus):
    """The configuration status plus ToolHive's own fields for this kind, mirrored from it."""

    validation_status: Literal["Valid", "Invalid", "Unknown"] | None = None
    """Valid, Invalid (see validationErrors) or Unknown: the Valid condition in ToolHive's field."""
    validation_errors: list[str] = Field(
        default_factory=list, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Why the spec is invalid (each message names the field)."""
    referencing_virtual_servers: list[str] = Field(
        default_factory=list, json_schema_extra={"x-kubernetes-list-type": "set"}
    )
    """Names of the VirtualMCPServers whose compositeToolRefs name this definition."""


class VirtualMCPCompositeToolDefinition(Resource):
    """A reusable composite tool."""

    info: ClassVar[KindInfo] = KindInfo(
        "VirtualMCPCompositeToolDefinition",
        "virtualmcpcompositetooldefinitions",
        ("vmcpctd", "compositetool"),
        columns=config_columns(
            PrinterColumn("Workflow", ".spec.name"),
            PrinterColumn("Steps", ".spec.steps[*].id", priority=1),
        ),
        workload=False,
    )
    kind: Literal["VirtualMCPCompositeToolDefinition"] = "VirtualMCPCompositeToolDefinition"
    spec: CompositeTool
    status: CompositeToolDefinitionStatus = Field(default_factory=CompositeToolDefinitionStatus)
