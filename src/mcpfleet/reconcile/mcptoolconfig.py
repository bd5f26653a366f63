"""Reconcile rules of MCPToolConfig: validation, configHash, referencing workloads, deletion guard."""

from __future__ import annotations

from mcpfleet.api.mcptoolconfig import MCPToolConfig
from mcpfleet.api.meta import ConfigStatus, WorkloadReference
from mcpfleet.reconcile import configkinds
from mcpfleet.reconcile.model import World


def referencing_workloads(name: str, world: World) -> list[WorkloadReference]:
    """MCPServers, MCPRemoteProxies and VirtualMCPServers (aggregation.tools[].toolConfigRef) using it."""
    found: list[tuple[str, str, list[str]]] = []
    for server in world.servers:
        ref = server.spec.tool_config_ref
        if ref is not None and ref.name == name:
            found.append(("MCPServer", server.name, [name]))
    for proxy in world.remote_proxies:
        ref = proxy.spec.tool_config_ref
        if ref is not None and ref.name == name:
            found.append(("MCPRemoteProxy", proxy.name, [name]))
    for vmcp in world.virtual_servers:
        aggregation = vmcp.spec.config.aggregation
        for tool in (aggregation.tools if aggregation else None) or ():
            if tool.tool_config_ref is not None and tool.tool_config_ref.name == name:
                found.append(("VirtualMCPServer", vmcp.name, [name]))
    return configkinds.references(found)


def status(
    previous: ConfigStatus, obj: MCPToolConfig, world: World, *, deleting: bool, now: str | None = None
) -> ConfigStatus:
    refs = referencing_workloads(obj.name, world)
    return configkinds.config_status(previous, obj=obj, refs=refs, deleting=deleting, now=now)


config_hash = configkinds.config_hash
