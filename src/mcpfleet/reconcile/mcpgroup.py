"""Reconcile rules of MCPGroup: no children; the status lists member servers, remote proxies and
MCPServerEntries.

Membership is by reference: a server or remote proxy joins by setting `spec.groupRef` to the group's
name. When a group is deleted its members keep running and their `GroupRefValidated` condition turns
False (`reconcile.common.group_condition`).
"""

from __future__ import annotations

from mcpfleet.api.mcpgroup import MCPGroup, MCPGroupStatus
from mcpfleet.api.meta import set_condition
from mcpfleet.reconcile.model import World


def member_servers(group: str, world: World) -> list[str]:
    return sorted(s.name for s in world.servers if s.spec.group_ref == group)


def member_remote_proxies(group: str, world: World) -> list[str]:
    return sorted(p.name for p in world.remote_proxies if p.spec.group_ref == group)


def member_entries(group: str, world: World) -> list[str]:
    return sorted(e.name for e in world.server_entries if e.spec.group_ref.name == group)


def status(previous: MCPGroupStatus, group: MCPGroup, world: World, now: str | None = None) -> MCPGroupStatus:
    """The group's status; equal to `previous` when membership did not change."""
    servers = member_servers(group.name, world)
    proxies = member_remote_proxies(group.name, world)
    entries = member_entries(group.name, world)
    message = f"{len(servers)} servers, {len(proxies)} remote proxies, {len(entries)} entries"
    conditions = set_condition(
        list(previous.conditions),
        type="Ready",
        status="True",
        reason="MembershipComputed",
        message=message,
        observed_generation=group.generation,
        now=now,
    )
    return MCPGroupStatus(
        phase="Ready",
        servers=servers,
        server_count=len(servers),
        remote_proxies=proxies,
        remote_proxy_count=len(proxies),
        entries=entries,
        entry_count=len(entries),
        observed_generation=group.generation,
        conditions=conditions,
    )
