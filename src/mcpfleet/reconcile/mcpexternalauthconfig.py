"""Reconcile rules of MCPExternalAuthConfig: validation, configHash, referencing workloads, deletion guard."""

from __future__ import annotations

from mcpfleet.api.mcpexternalauthconfig import MCPExternalAuthConfig
from mcpfleet.api.meta import ConfigStatus, WorkloadReference
from mcpfleet.api.virtualmcpserver import VirtualMCPServer
from mcpfleet.reconcile import configkinds
from mcpfleet.reconcile.model import World


def referencing_workloads(name: str, world: World) -> list[WorkloadReference]:
    """MCPServers, MCPRemoteProxies (externalAuthConfigRef, authServerRef) and VirtualMCPServers (outgoingAuth) using it."""

    def gateway_uses(vmcp: VirtualMCPServer) -> bool:
        outgoing = vmcp.spec.outgoing_auth
        auths = [outgoing.default, *(outgoing.backends or {}).values()] if outgoing else []
        return any(
            a is not None
            and a.external_auth_config_ref is not None
            and a.external_auth_config_ref.name == name
            for a in auths
        )

    outgoing = configkinds.referencing(name, world, lambda spec: spec.external_auth_config_ref, gateway_uses)
    # authServerRef (MCPServer, MCPRemoteProxy): the workload's embedded authorization server.
    embedded = configkinds.referencing(name, world, lambda spec: spec.auth_server_ref, lambda _v: False)
    return sorted(
        {(r.kind, r.name): r for r in (*outgoing, *embedded)}.values(), key=lambda r: (r.kind, r.name)
    )


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
