"""Reconcile rules of MCPGroup, MCPToolConfig and MCPExternalAuthConfig."""

from __future__ import annotations

from mcpfleet.api.mcpgroup import MCPGroupStatus
from mcpfleet.api.meta import ConfigStatus
from mcpfleet.reconcile import configkinds, mcpexternalauthconfig, mcpgroup, mcptoolconfig
from mcpfleet.reconcile.model import World

from .conftest import obj


def test_group_status_lists_members_and_is_stable() -> None:
    group = obj("kind: MCPGroup\nmetadata: {name: g}")
    servers = tuple(
        obj(f"kind: MCPServer\nmetadata: {{name: {n}}}\nspec: {{image: 'uvx://x', groupRef: {gr}}}")
        for n, gr in (("b", "g"), ("a", "g"), ("c", "other"))
    )
    proxies = (
        obj("kind: MCPRemoteProxy\nmetadata: {name: r}\nspec: {remoteURL: 'https://x/mcp', groupRef: g}"),
    )
    world = World(platform="local", namespace="team", servers=servers, remote_proxies=proxies)
    status = mcpgroup.status(MCPGroupStatus(), group, world, now="t")
    assert status.servers == ["a", "b"] and status.server_count == 2
    assert status.remote_proxies == ["r"] and status.remote_proxy_count == 1
    assert mcpgroup.status(status, group, world, now="later") == status


def test_tool_config_refs_hash_and_deletion_guard() -> None:
    tc = obj("kind: MCPToolConfig\nmetadata: {name: tc}\nspec: {toolsFilter: [a]}")
    server = obj("kind: MCPServer\nmetadata: {name: s}\nspec: {image: 'uvx://x', toolConfigRef: {name: tc}}")
    vmcp = obj(
        "kind: VirtualMCPServer\nmetadata: {name: gw}\nspec: {config: {groupRef: g, aggregation:"
        " {tools: [{workload: s, toolConfigRef: {name: tc}}]}}, incomingAuth: {type: anonymous}}"
    )
    world = World(platform="kubernetes", namespace="team", servers=(server,), virtual_servers=(vmcp,))
    status = mcptoolconfig.status(ConfigStatus(), tc, world, deleting=False, now="t")
    assert [(r.kind, r.name) for r in status.referencing_workloads] == [
        ("MCPServer", "s"),
        ("VirtualMCPServer", "gw"),
    ]
    assert status.config_hash == configkinds.config_hash(tc) and len(status.config_hash or "") == 64
    assert status.conditions[0].type == "Valid" and status.conditions[0].status == "True"
    assert configkinds.needs_finalizer(status.referencing_workloads)
    blocked = mcptoolconfig.status(status, tc, world, deleting=True, now="t")
    cond = next(c for c in blocked.conditions if c.type == "DeletionBlocked")
    assert cond.status == "True" and "MCPServer/s" in cond.message
    free = mcptoolconfig.status(blocked, tc, World(platform="kubernetes", namespace="team"), deleting=True)
    assert not configkinds.needs_finalizer(free.referencing_workloads)


def test_external_auth_refs() -> None:
    auth = obj("kind: MCPExternalAuthConfig\nmetadata: {name: ea}\nspec: {type: unauthenticated}")
    proxy = obj(
        "kind: MCPRemoteProxy\nmetadata: {name: r}\n"
        "spec: {remoteURL: 'https://x/mcp', externalAuthConfigRef: {name: ea}}"
    )
    world = World(platform="kubernetes", namespace="team", remote_proxies=(proxy,))
    status = mcpexternalauthconfig.status(ConfigStatus(), auth, world, deleting=False)
    assert [(r.kind, r.name) for r in status.referencing_workloads] == [("MCPRemoteProxy", "r")]


def test_invalid_config_status_names_the_field() -> None:
    status = configkinds.invalid_config_status(ConfigStatus(), generation=3, message="spec.type: bad")
    assert status.conditions[0].status == "False" and status.conditions[0].message == "spec.type: bad"
    assert status.observed_generation == 3
