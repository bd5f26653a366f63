"""Reconcile rules of MCPToolConfig: validation, configHash, referencing workloads, deletion guard."""

from __future__ import annotations

from mcpfleet.api.mcptoolconfig import MCPToolConfig
from mcpfleet.api.meta import ConfigStatus, WorkloadReference
from mcpfleet.api.virtualmcpserver import VirtualMCPServer
from mcpfleet.reconcile import configkinds
from mcpfleet.reconcile.model import World


def referencing_workloads(name: str, world: World) -> list[WorkloadReference]:
    """MCPServers, MCPRemoteProxies and VirtualMCPServers (aggregation.tools[].toolConfigRef) using it."""

    def gateway_uses(vmcp: VirtualMCPServer) -> bool:
        tools = vmcp.spec.config.aggregation.tools
        return any(t.tool_config_ref is not None and t.tool_config_ref.name == name for t in tools)

    return configkinds.referencing(name, world, lambda spec: spec.tool_config_ref, gateway_uses)


def status(
    previous: ConfigStatus, obj: MCPToolConfig, world: World, *, deleting: bool, now: str | None = None
) -> ConfigStatus:
    refs = referencing_workloads(obj.name, world)
    return configkinds.config_status(previous, obj=obj, refs=refs, deleting=deleting, now=now)


config_hash = configkinds.config_hash
