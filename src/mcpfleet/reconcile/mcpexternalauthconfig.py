"""Reconcile rules of MCPExternalAuthConfig: validation, configHash, referencing workloads, deletion guard."""

from __future__ import annotations

from mcpfleet.api.mcpexternalauthconfig import MCPExternalAuthConfig
from mcpfleet.api.meta import ConfigStatus, WorkloadReference
from mcpfleet.reconcile import configkinds
from mcpfleet.reconcile.model import World


def _vmcp_refs(vmcp_outgoing: object, name: str) -> bool:
    from mcpfleet.api.virtualmcpserver import OutgoingAuth

    if not isinstance(vmcp_outgoing, OutgoingAuth):
        return False
    auths = [vmcp_outgoing.default, *(vmcp_outgoing.backends or {}).values()]
    return any(
        a is not None and a.external_auth_config_ref is not None and a.external_auth_config_ref.name == name
        for a in auths
    )


def referencing_workloads(name: str, world: World) -> list[WorkloadReference]:
    """MCPServers, MCPRemoteProxies (externalAuthConfigRef) and VirtualMCPServers (outgoingAuth) using it."""
    found: list[tuple[str, str, list[str]]] = []
    for server in world.servers:
        ref = server.spec.external_auth_config_ref
        if ref is not None and ref.name == name:
            found.append(("MCPServer", server.name, [name]))
    for proxy in world.remote_proxies:
        ref = proxy.spec.external_auth_config_ref
        if ref is not None and ref.name == name:
            found.append(("MCPRemoteProxy", proxy.name, [name]))
    for vmcp in world.virtual_servers:
        if _vmcp_refs(vmcp.spec.outgoing_auth, name):
            found.append(("VirtualMCPServer", vmcp.name, [name]))
    return configkinds.references(found)


def status(
    previous: ConfigStatus,
    obj: MCPExternalAuthConfig,
    world: World,
    *,
    deleting: bool,
    now: str | None = None,
) -> ConfigStatus:
    refs = referencing_workloads(obj.name, world)
    return configkinds.config_status(previous, obj=obj, refs=refs, deleting=deleting, now=now)


config_hash = configkinds.config_hash
